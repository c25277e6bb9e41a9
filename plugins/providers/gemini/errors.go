package gemini

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/kilnhq/kiln/plugins/providers"
)

// apiError is the body of a Google API error:
//
//	{"error": {"code": 429, "message": "...", "status": "RESOURCE_EXHAUSTED",
//	  "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}, ...]}}
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
	Details []struct {
		Type       string `json:"@type"`
		Reason     string `json:"reason"`     // google.rpc.ErrorInfo
		RetryDelay string `json:"retryDelay"` // google.rpc.RetryInfo, a protobuf Duration ("7s", "1.5s")
	} `json:"details"`
}

// errorBody is the envelope every error arrives in, as an HTTP body or
// inside the stream.
type errorBody struct {
	Error *apiError `json:"error"`
}

// httpError classifies a non-2xx response: by HTTP status and wording
// (providers.HTTPError), then by the API's own status name, error reason
// and RetryInfo, which say more than the status: an invalid key is a 400
// with reason API_KEY_INVALID, and a 429 usually carries its wait only in
// RetryInfo.
func httpError(resp *http.Response) *providers.Error {
	var body errorBody
	e := providers.HTTPError(ID, resp, func(b []byte) string {
		if json.Unmarshal(b, &body) != nil || body.Error == nil {
			return ""
		}
		return body.Error.Message
	})
	if body.Error != nil {
		body.Error.refine(e)
	}
	return e
}

// streamError classifies an error object that arrived inside a 200 stream
// exactly as the same error in an HTTP response would be, its code
// standing for the HTTP status.
func streamError(a *apiError) *providers.Error {
	code := a.Code
	if code < 400 || code > 599 {
		code = http.StatusInternalServerError
	}
	raw, _ := json.Marshal(errorBody{a})
	return httpError(&http.Response{StatusCode: code, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(raw))})
}

// refine corrects e's kind with the API's status name and reasons, and
// takes the RetryInfo delay when no retry-after header gave one.
func (a *apiError) refine(e *providers.Error) {
	switch a.Status {
	case "UNAUTHENTICATED", "PERMISSION_DENIED":
		e.Kind = providers.KindAuth
	case "RESOURCE_EXHAUSTED":
		e.Kind = providers.KindRateLimit
	case "UNAVAILABLE", "INTERNAL":
		e.Kind = providers.KindUnavailable
	case "DEADLINE_EXCEEDED":
		e.Kind = providers.KindTimeout
	}
	for _, d := range a.Details {
		switch {
		case d.Reason == "API_KEY_INVALID":
			e.Kind = providers.KindAuth
		case strings.HasSuffix(d.Type, "google.rpc.RetryInfo") && e.RetryAfter == 0:
			e.RetryAfter = parseDelay(d.RetryDelay)
		}
	}
}

// parseDelay reads a protobuf Duration in its JSON form ("7s",
// "0.250s"); 0 when it is not one.
func parseDelay(s string) time.Duration {
	if !strings.HasSuffix(s, "s") {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0
	}
	return d
}
