package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/kilnhq/kiln/core"
)

// Web-level error codes, in addition to the core codes.
const (
	codeUnauthorized     = core.EUNAUTHORIZED       // 401: missing or wrong bearer token
	codeTooLarge         = "too_large"              // 413: the request body exceeds maxBody
	codeInvalidJSON      = "invalid_json"           // 400: the body is not the expected JSON
	codeUnsupportedMedia = "unsupported_media_type" // 415: a body that is not application/json
	codeMethodNotAllowed = "method_not_allowed"     // 405: the route exists, the method does not
)

// Messages shown in place of details that must not reach clients.
const (
	internalErrorMessage = "internal error"
	cancelledMessage     = "the request was cancelled"
)

// apiError is an error raised by the web layer itself, with its own code.
type apiError struct {
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// errorf returns an *apiError with a formatted message; code is a
// web-level or core code.
func errorf(code, format string, args ...any) *apiError {
	return &apiError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// statusOf maps an error code, core or web-level, to its HTTP status. It is
// the only place that does so; unknown codes are 500.
func statusOf(code string) int {
	switch code {
	case core.EINVALID, codeInvalidJSON:
		return http.StatusBadRequest
	case codeUnauthorized:
		return http.StatusUnauthorized
	case core.EFORBIDDEN:
		return http.StatusForbidden
	case core.ENOTFOUND:
		return http.StatusNotFound
	case codeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case core.ECONFLICT:
		return http.StatusConflict
	case codeTooLarge:
		return http.StatusRequestEntityTooLarge
	case codeUnsupportedMedia:
		return http.StatusUnsupportedMediaType
	case core.ELIMIT:
		return http.StatusTooManyRequests
	case core.EUNAVAIL:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// errorBody is the JSON envelope of every error response.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// classify returns the code and client-safe message of err. Errors that are
// neither *apiError nor *core.Error are internal, except the cancellation
// of the request context (client gone or server shutting down), which is
// unavailable.
func classify(err error) (code, message string) {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Code, ae.Message
	}
	var ce *core.Error
	if errors.As(err, &ce) {
		if ce.Code == core.EINTERNAL {
			return core.EINTERNAL, internalErrorMessage
		}
		return ce.Code, ce.Message
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return core.EUNAVAIL, cancelledMessage
	}
	return core.EINTERNAL, internalErrorMessage
}

// writeError writes err as a JSON error response. Internal errors are
// logged with their real text, which never reaches the client.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code, message := classify(err)
	status := statusOf(code)
	if status == http.StatusInternalServerError {
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	s.writeJSON(w, status, errorBody{Error: errorDetail{Code: code, Message: message}})
}

// writeJSON writes v as the JSON response body with the given status,
// through the redactor: no secret leaves in an API answer, not even inside
// an upstream's error text.
func (s *server) writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		s.log.Error("encode response", "err", err)
		status, buf = http.StatusInternalServerError, *bytes.NewBufferString(`{"error":{"code":"internal","message":"internal error"}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The status line is out; a write error can only mean the client
	// went away, and there is nobody left to tell.
	_, _ = w.Write(s.redactor.RedactBytes(buf.Bytes()))
}
