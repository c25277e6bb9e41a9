package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
)

// maxBody is the largest request body accepted, in bytes (1 MiB).
const maxBody = 1 << 20

// decodeBody reads r's JSON body and parses it with parse. The body is
// limited to maxBody bytes (413 too_large, read no further), must be
// application/json when it has a Content-Type (415), and must not be empty
// when required (400). An empty optional body parses as {}.
func decodeBody[T any](w http.ResponseWriter, r *http.Request, required bool, parse func([]byte) (T, error)) (T, error) {
	var zero T
	body, err := readBody(w, r)
	if err != nil {
		return zero, err
	}
	if len(bytes.TrimLeft(body, jsonSpace)) == 0 {
		if required {
			return zero, errorf(codeInvalidJSON, "request body is empty; expected a JSON object")
		}
		return parse([]byte("{}"))
	}
	if err := checkMediaType(r); err != nil {
		return zero, err
	}
	return parse(body)
}

// readBody reads the whole body, at most maxBody bytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	tooLarge := errorf(codeTooLarge, "request body exceeds %d bytes (1 MiB)", maxBody)
	if r.ContentLength > maxBody {
		return nil, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge
	case err != nil:
		return nil, errorf(core.EINVALID, "could not read the request body: %s", err)
	}
	return body, nil
}

// checkMediaType accepts a missing Content-Type and application/json with
// any parameters (such as charset).
func checkMediaType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		return nil
	}
	return errorf(codeUnsupportedMedia, "Content-Type %q is not supported; send application/json", clip(ct, 80))
}

// jsonSpace is the whitespace JSON allows between tokens.
const jsonSpace = " \t\r\n"

// unmarshalStrict decodes b, which must hold exactly one JSON object, into
// v. Unknown fields, bytes that are not UTF-8 and unpaired surrogate
// escapes are rejected (checkJSONText). Errors are *apiError with code
// invalid_json and a message naming the field and the problem, or the
// *core.Error a field's UnmarshalJSON returned.
func unmarshalStrict(b []byte, v any) error {
	if trimmed := bytes.TrimLeft(b, jsonSpace); len(trimmed) == 0 || trimmed[0] != '{' {
		return errorf(codeInvalidJSON, "request body must be a JSON object")
	}
	if err := checkJSONText(b); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if rest := bytes.TrimLeft(b[dec.InputOffset():], jsonSpace); len(rest) > 0 {
		return errorf(codeInvalidJSON, "unexpected data after the JSON object at byte %d", len(b)-len(rest))
	}
	return nil
}

// jsonError turns an encoding/json error into a client-facing error.
func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var ce *core.Error
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.As(err, &syn):
		return errorf(codeInvalidJSON, "malformed JSON at byte %d: %s", syn.Offset, syn)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(codeInvalidJSON, "malformed JSON: unexpected end of input")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return errorf(codeInvalidJSON, "request body must be a JSON object")
		}
		return errorf(codeInvalidJSON, "field %q: expected %s, got %s", typ.Field, jsonTypeName(typ.Type), jsonValueName(typ.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return errorf(codeInvalidJSON, "%s", err)
	default:
		return errorf(codeInvalidJSON, "malformed JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
}

// jsonTypeName names the JSON type that decodes into t.
func jsonTypeName(t reflect.Type) string {
	if t == nil {
		return "a different type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return t.String()
}

// jsonValueName rewrites encoding/json's description of a value ("bool",
// "number 1.5") in JSON terms.
func jsonValueName(v string) string {
	if v == "bool" {
		return "boolean"
	}
	return clip(v, 40)
}

// clip shortens s to at most n bytes, on a rune boundary, for an error
// message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// queryInt parses the optional integer query parameter name, which must lie
// in [lo, hi]. It returns def when the parameter is absent or empty.
func queryInt(r *http.Request, name string, lo, hi, def int64) (int64, error) {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, errorf(core.EINVALID, "query parameter %q must be %s, got %q", name, rangeText(lo, hi), clip(raw, 40))
	}
	return n, nil
}

// rangeText describes the integers in [lo, hi].
func rangeText(lo, hi int64) string {
	if hi == math.MaxInt64 {
		return fmt.Sprintf("an integer >= %d", lo)
	}
	return fmt.Sprintf("an integer from %d to %d", lo, hi)
}

// queryBool parses the optional boolean query parameter name ("true" or
// "false"; also 1/0 and the other strconv.ParseBool forms).
func queryBool(r *http.Request, name string) (bool, error) {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(raw)
	if err != nil {
		return false, errorf(core.EINVALID, "query parameter %q must be true or false, got %q", name, clip(raw, 40))
	}
	return b, nil
}

// Page size limits for list endpoints.
const (
	maxPageSize     = 500
	defaultPageSize = 50
	noLimit         = 0 // tells the store to use its default page size
)

// queryLimit parses ?limit=, an integer from 1 to maxPageSize.
func queryLimit(r *http.Request) (int, error) {
	n, err := queryInt(r, "limit", 1, maxPageSize, noLimit)
	return int(n), err
}
