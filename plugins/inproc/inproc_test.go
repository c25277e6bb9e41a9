package inproc_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/inproc"
	sdkplugin "github.com/kilnhq/kiln/sdk/plugin"
)

func TestNewToolErrors(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	ts := inproc.New(sdkplugin.Toolset{Tools: []sdkplugin.Tool{
		{Name: "boom", Handler: func(context.Context, json.RawMessage) (sdkplugin.Result, error) { panic("kaboom") }},
		{Name: "mute", Handler: func(context.Context, json.RawMessage) (sdkplugin.Result, error) {
			return sdkplugin.Result{}, errors.New("")
		}},
		{Name: "stuck", Handler: func(context.Context, json.RawMessage) (sdkplugin.Result, error) {
			<-release
			return sdkplugin.TextResult("late"), nil
		}},
		{Name: "ok", Handler: func(context.Context, json.RawMessage) (sdkplugin.Result, error) {
			return sdkplugin.TextResult("fine"), nil
		}},
	}})
	defer ts.Close()
	ctx := context.Background()
	if res, err := ts.Call(ctx, "boom", nil); err != nil || !res.IsError || !strings.Contains(res.Text(), `tool "boom" panicked: kaboom`) {
		t.Errorf("panicking handler: %+v, %v", res, err)
	}
	if res, err := ts.Call(ctx, "mute", nil); err != nil || !res.IsError || res.Text() != "tool failed" {
		t.Errorf("empty error: %+v, %v", res, err)
	}
	// A handler that ignores its context does not hold the caller.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := ts.Call(cctx, "stuck", nil); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, plugins.ErrTransport) {
		t.Errorf("stuck handler past the deadline: err = %v", err)
	}
	if out, err := ts.Call(ctx, "ok", nil); err != nil || out.Text() != "fine" || out.IsError {
		t.Errorf("ok = %+v, %v", out, err)
	}
}

func TestNewRejectsBadToolsets(t *testing.T) {
	h := func(context.Context, json.RawMessage) (sdkplugin.Result, error) { return sdkplugin.Result{}, nil }
	for name, tools := range map[string][]sdkplugin.Tool{
		"no name":    {{Handler: h}},
		"no handler": {{Name: "x"}},
		"duplicate":  {{Name: "x", Handler: h}, {Name: "x", Handler: h}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: InProcess did not panic", name)
				}
			}()
			inproc.New(sdkplugin.Toolset{Tools: tools})
		}()
	}
}

func TestCloseEndsCallsInFlight(t *testing.T) {
	started := make(chan string, 2)
	cancelled := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	ts := inproc.New(sdkplugin.Toolset{Tools: []sdkplugin.Tool{
		{Name: "polite", Handler: func(ctx context.Context, _ json.RawMessage) (sdkplugin.Result, error) {
			started <- "polite"
			<-ctx.Done()
			close(cancelled)
			return sdkplugin.Result{}, ctx.Err() // a tool error, as a handler would return it
		}},
		{Name: "stuck", Handler: func(context.Context, json.RawMessage) (sdkplugin.Result, error) {
			started <- "stuck"
			<-release
			return sdkplugin.TextResult("late"), nil
		}},
	}})
	errs := make(chan error, 2)
	for _, tool := range []string{"polite", "stuck"} {
		go func() {
			out, err := ts.Call(context.Background(), tool, nil)
			if err == nil {
				err = errors.New("succeeded with " + out.Text())
			}
			errs <- err
		}()
	}
	<-started
	<-started
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		// Without the fix the calls wait for release, which comes only
		// when the test returns.
		select {
		case err := <-errs:
			if !errors.Is(err, plugins.ErrTransport) || !strings.Contains(err.Error(), "closed") {
				t.Errorf("call in flight at Close: %v; want a transport error saying the toolset closed", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a call in flight did not end when the toolset closed")
		}
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Error("Close did not cancel the context of the handler in flight")
	}
	if _, err := ts.Call(context.Background(), "polite", nil); !errors.Is(err, plugins.ErrTransport) {
		t.Errorf("call after Close: %v", err)
	}
}
