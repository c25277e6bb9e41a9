package wasm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kilnhq/kiln/plugins/wireconv/protocol2"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// This file speaks the Kiln WASM ABI versions 1 and 2 (specs/wasm-abi.md,
// "Legacy versions") to the modules built for them, in terms of version
// 3: a module's description is translated to version 3's "kinds", a
// version 3 request to the module's version, and its answer back. The
// kinds and shapes are frozen: they are what the hosts of those versions
// sent and read, written here or, for a model turn (core's JSON of the
// time, which process plugins of protocol 2 read too), in
// plugins/wireconv/protocol2, rather than taken from core or the kind
// packages, so that a change there cannot break a module built before
// version 3. testdata/legacy holds golden translations.

// The kinds of ABI versions 1 and 2, as their modules name them.
const (
	legacyToolset  = "toolset"
	legacyProvider = "model-provider"
)

// legacyCarries reports whether a module of ABI version abi (1 or 2) can
// serve kind.
func legacyCarries(abi int, kind string) bool {
	return kind == legacyToolset || abi == 2 && kind == legacyProvider
}

// legacyKinds names the kinds a module of ABI version abi (1 or 2) can
// serve, for errors.
func legacyKinds(abi int) string {
	if abi == 1 {
		return fmt.Sprintf("%q", legacyToolset)
	}
	return fmt.Sprintf("%q and %q", legacyToolset, legacyProvider)
}

// legacyDescription translates the kiln_describe answer of a module of
// ABI version 1 (a JSON array of tool specs) or 2 (an object with a
// member per kind: "toolset", an array of tool specs, and
// "model-provider", a provider description) to version 3's kinds: the
// toolset as {"tools": [...]}, the provider's description as it is (its
// members are those of wire.ProviderDescription, without "v").
func legacyDescription(abi int, out []byte) (map[string]json.RawMessage, error) {
	tools := func(specs json.RawMessage) (json.RawMessage, error) {
		var list []json.RawMessage
		if err := json.Unmarshal(specs, &list); err != nil || list == nil {
			return nil, errors.New("malformed tool list: want a JSON array of tool specs")
		}
		return append(append([]byte(`{"tools":`), specs...), '}'), nil
	}
	if abi == 1 {
		t, err := tools(out)
		if err != nil {
			return nil, err
		}
		return map[string]json.RawMessage{legacyToolset: t}, nil
	}
	var d struct {
		Toolset  json.RawMessage `json:"toolset"`
		Provider json.RawMessage `json:"model-provider"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		return nil, fmt.Errorf("malformed description: %w", err)
	}
	kinds := map[string]json.RawMessage{}
	if d.Toolset != nil {
		t, err := tools(d.Toolset)
		if err != nil {
			return nil, err
		}
		kinds[legacyToolset] = t
	}
	if d.Provider != nil {
		if !bytes.HasPrefix(d.Provider, []byte("{")) {
			return nil, errors.New("malformed model-provider description: want a JSON object")
		}
		kinds[legacyProvider] = d.Provider
	}
	if len(kinds) == 0 {
		return nil, fmt.Errorf("the module describes no kind (want %s)", legacyKinds(abi))
	}
	return kinds, nil
}

// legacyRequest translates the version 3 request req, for op of kind, to
// the ABI version abi (1 or 2) of a module, and returns it with the
// translation of the module's answer back to version 3's {"result"} or
// {"error"}. It fails for a request the module's version cannot carry.
func legacyRequest(abi int, kind, op string, req []byte) ([]byte, func([]byte) ([]byte, error), error) {
	switch {
	case kind == legacyToolset && op == "call":
		return legacyCall(req)
	case kind == legacyProvider && abi == 2 && op == "models":
		out, err := legacyProviderRequest(op, req, nil)
		return out, legacyModels, err
	case kind == legacyProvider && abi == 2 && op == "turn":
		out, err := legacyProviderRequest(op, req, legacyTurn)
		return out, legacyTurnAnswer, err
	}
	return nil, nil, fmt.Errorf("the module speaks Kiln WASM ABI v%d, which carries %s only and no %q %q request (rebuild it with a newer sdk/plugin)", abi, legacyKinds(abi), kind, op)
}

// legacyCall is a tool call: the request {"tool": "<name>", "args":
// <json>}, the answer {"result": "<text>"}, which becomes a tool result
// of one text part, or {"error": "<message>"}.
func legacyCall(req []byte) ([]byte, func([]byte) ([]byte, error), error) {
	var r struct {
		Tool string          `json:"tool"`
		Args json.RawMessage `json:"args"`
	}
	if err := json.Unmarshal(req, &r); err != nil {
		return nil, nil, fmt.Errorf("malformed tool call: %w", err)
	}
	name, _ := json.Marshal(r.Tool) // HTML-escaped, as the hosts of ABI 1 and 2 wrote it
	var b bytes.Buffer
	b.WriteString(`{"tool":`)
	b.Write(name)
	b.WriteString(`,"args":`)
	if len(r.Args) == 0 {
		b.WriteString("{}")
	} else if err := json.Compact(&b, r.Args); err != nil {
		return nil, nil, fmt.Errorf("malformed tool call arguments: %w", err)
	}
	b.WriteByte('}')
	return b.Bytes(), legacyToolAnswer, nil
}

func legacyToolAnswer(out []byte) ([]byte, error) {
	var a struct {
		Result *string `json:"result"`
		Error  *string `json:"error"`
	}
	if err := json.Unmarshal(out, &a); err != nil || a.Result == nil && a.Error == nil {
		return nil, errors.New(`malformed response: want {"result": "<text>"} or {"error": "<message>"}`)
	}
	if a.Error != nil {
		return json.Marshal(map[string]string{"error": *a.Error})
	}
	return json.Marshal(map[string]any{"result": wire.TextResult(*a.Result)})
}

// legacyProviderRequest re-encodes a model-provider request as ABI 2
// carried it: {"kind": "model-provider", "op", "settings" (never null),
// "model", "request"}, the request (a turn's) translated by turn.
func legacyProviderRequest(op string, req []byte, turn func(json.RawMessage) (json.RawMessage, error)) ([]byte, error) {
	var r struct {
		Settings map[string]string `json:"settings"`
		Model    string            `json:"model"`
		Request  json.RawMessage   `json:"request"`
	}
	if err := json.Unmarshal(req, &r); err != nil {
		return nil, fmt.Errorf("malformed %s request: %w", op, err)
	}
	out := struct {
		Kind     string            `json:"kind"`
		Op       string            `json:"op"`
		Settings map[string]string `json:"settings"`
		Model    string            `json:"model,omitempty"`
		Request  json.RawMessage   `json:"request,omitempty"`
	}{Kind: legacyProvider, Op: op, Settings: r.Settings, Model: r.Model}
	if out.Settings == nil {
		out.Settings = map[string]string{}
	}
	if turn != nil {
		var err error
		if out.Request, err = turn(r.Request); err != nil {
			return nil, err
		}
	}
	return json.Marshal(out)
}

// legacyModels translates {"models": [...]}: the model infos' members
// (id, name, context_size) are wire.ModelInfo's.
func legacyModels(out []byte) ([]byte, error) {
	return legacyAnswer(out, "models", func(models json.RawMessage) (any, error) {
		return map[string]json.RawMessage{"models": models}, nil
	})
}

// legacyAnswer translates an ABI 2 answer {"<member>": ...} with conv,
// or passes {"error"} on.
func legacyAnswer(out []byte, member string, conv func(json.RawMessage) (any, error)) ([]byte, error) {
	var a map[string]json.RawMessage
	if err := json.Unmarshal(out, &a); err != nil {
		return nil, fmt.Errorf("malformed response: %w", err)
	}
	if e, ok := a["error"]; ok {
		var msg string
		json.Unmarshal(e, &msg)
		return json.Marshal(map[string]string{"error": msg})
	}
	v, ok := a[member]
	if !ok {
		return nil, fmt.Errorf("the response has no %q", member)
	}
	r, err := conv(v)
	if err != nil {
		return nil, fmt.Errorf("malformed %q: %w", member, err)
	}
	return json.Marshal(map[string]any{"result": r})
}

// legacyTurn translates a version 3 turn request (wire.TurnRequest) to
// ABI 2's, core's ModelRequest of the time: the shape process plugins of
// protocol 2 read too, frozen in plugins/wireconv/protocol2.
func legacyTurn(req json.RawMessage) (json.RawMessage, error) {
	var w wire.TurnRequest
	if err := json.Unmarshal(req, &w); err != nil {
		return nil, fmt.Errorf("malformed turn request: %w", err)
	}
	return json.Marshal(protocol2.FromTurnRequest(w))
}

// legacyTurnAnswer translates {"response": {core.ModelResponse}} to a
// version 3 turn response (wire.TurnResponse).
func legacyTurnAnswer(out []byte) ([]byte, error) {
	return legacyAnswer(out, "response", func(raw json.RawMessage) (any, error) {
		var r protocol2.TurnResponse
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, err
		}
		return r.WireTurnResponse(), nil
	})
}
