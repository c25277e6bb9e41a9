package web

import (
	"context"
	"net/http"
	"regexp"

	"github.com/go-chi/chi/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// Providers manages the model providers (OpenAI, Anthropic, Ollama, ...)
// and lists their models: the provider hub as the API sees it, an
// interface so that this package does not depend on the hub and tests can
// use a fake. Errors are *core.Error values; their code picks the HTTP
// status.
//
// Every Status it returns has its secrets redacted already: the handlers
// serialize what Providers returns and nothing else, in particular never
// the ConfigInput they received.
type Providers interface {
	// List returns every provider, configured or not.
	List(ctx context.Context) []pluginapi.ProviderStatus
	// Get returns one provider (ENOTFOUND for an unknown provider id).
	Get(ctx context.Context, id string) (pluginapi.ProviderStatus, error)
	// Configure sets some of a provider's settings and returns its new
	// status: EINVALID for an unknown setting name or a bad value, the
	// message saying which.
	Configure(ctx context.Context, id string, in pluginapi.ProviderConfig) (pluginapi.ProviderStatus, error)
	// Reset forgets the provider's stored configuration (environment
	// defaults still apply) and returns its status after that.
	Reset(ctx context.Context, id string) (pluginapi.ProviderStatus, error)
	// Models lists the configured providers' models and every provider's
	// status.
	Models(ctx context.Context) pluginapi.Models
}

// providerRoutes registers the /providers and /models routes. Like the
// plugin routes they are mounted even when Options.Providers is nil, and
// then answer 404 with noProvidersMessage.
func (s *server) providerRoutes(r chi.Router) {
	r.Get("/providers", s.providerAPI(s.listProviders))
	r.Get("/providers/{id}", s.providerAPI(s.getProvider))
	r.Put("/providers/{id}", s.providerAPI(s.configureProvider))
	r.Delete("/providers/{id}", s.providerAPI(s.resetProvider))
	r.Get("/models", s.providerAPI(s.listModels))
}

// noProvidersMessage is the error of every provider route on a server
// without a provider hub.
const noProvidersMessage = "providers are not available on this server"

// providerFunc is an apiFunc that uses the provider hub.
type providerFunc func(p Providers, w http.ResponseWriter, r *http.Request) (int, any, error)

// providerAPI adapts a providerFunc; without a hub it answers 404.
func (s *server) providerAPI(f providerFunc) http.HandlerFunc {
	return s.api(func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		if s.opts.Providers == nil {
			return 0, nil, errorf(core.ENOTFOUND, noProvidersMessage)
		}
		return f(s.opts.Providers, w, r)
	})
}

func (s *server) listProviders(p Providers, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	list := p.List(r.Context())
	if list == nil {
		list = []pluginapi.ProviderStatus{}
	}
	return http.StatusOK, map[string]any{"providers": list}, nil
}

func (s *server) getProvider(p Providers, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	st, err := p.Get(r.Context(), id(r))
	return http.StatusOK, st, err
}

// configureProvider answers with the status Configure returns: the input
// holds secrets and is never written back.
func (s *server) configureProvider(p Providers, w http.ResponseWriter, r *http.Request) (int, any, error) {
	in, err := decodeBody(w, r, true, parseConfigInput)
	if err != nil {
		return 0, nil, err
	}
	st, err := p.Configure(r.Context(), id(r), in)
	return http.StatusOK, st, err
}

func (s *server) resetProvider(p Providers, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	st, err := p.Reset(r.Context(), id(r))
	return http.StatusOK, st, err
}

func (s *server) listModels(p Providers, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	m := p.Models(r.Context())
	if m.Models == nil {
		m.Models = []pluginapi.Model{}
	}
	if m.Providers == nil {
		m.Providers = []pluginapi.ProviderStatus{}
	}
	return http.StatusOK, m, nil
}

// reSettingName is what a setting name may look like ("api_key",
// "base_url", ...). Which names a provider has is the hub's to say; this
// only keeps odd names out of error messages.
var reSettingName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// parseConfigInput parses the body of PUT /providers/{id}. Error messages
// name settings but never quote a value: values may be secrets.
func parseConfigInput(b []byte) (pluginapi.ProviderConfig, error) {
	var in pluginapi.ProviderConfig
	if err := unmarshalStrict(b, &in); err != nil {
		return pluginapi.ProviderConfig{}, err
	}
	if in.Settings == nil {
		return pluginapi.ProviderConfig{}, errorf(core.EINVALID, "field \"settings\" is required: an object of setting names to values (\"\" removes a setting)")
	}
	for name := range in.Settings {
		if !reSettingName.MatchString(name) {
			return pluginapi.ProviderConfig{}, errorf(core.EINVALID, "setting name %q is not valid: use letters, digits, '_', '.' or '-', at most 64", clip(name, 80))
		}
	}
	return in, nil
}
