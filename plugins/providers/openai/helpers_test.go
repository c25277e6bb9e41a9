package openai

import (
	"testing"

	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/providertest"
)

// newFake answers the n-th request with the n-th fixture (the last one
// again after that), an event at a time, and records what it was sent.
func newFake(t testing.TB, fixtures ...string) *providertest.Server {
	return providertest.ServeFixtures(t, providertest.Options{Pieces: providertest.Events}, fixtures...)
}

// newProvider returns the openai provider for api at url.
func newProvider(t testing.TB, api, url string) providers.Provider {
	t.Helper()
	p, err := New(providers.Settings{APIKey: "sk-test", BaseURL: url + "/v1", Extra: map[string]string{"api": api}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
