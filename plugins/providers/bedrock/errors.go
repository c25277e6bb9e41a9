package bedrock

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/kilnhq/kiln/plugins/providers"
)

// apiError reads the error type and message of a Bedrock error body
// ({"message": ...}, sometimes "Message", "__type" or "code") and of the
// x-amzn-ErrorType header ("ThrottlingException:http://internal..."),
// the header winning for the type.
func apiError(h http.Header, body []byte) (typ, msg string) {
	var b struct {
		Message  string `json:"message"`
		MessageU string `json:"Message"`
		Type     string `json:"__type"`
		Code     string `json:"code"`
	}
	_ = json.Unmarshal(body, &b) // a body that is not JSON leaves b empty
	msg = b.Message
	if msg == "" {
		msg = b.MessageU
	}
	typ = b.Code
	if typ == "" {
		typ = b.Type
	}
	if v := h.Get("X-Amzn-Errortype"); v != "" {
		typ = v
	}
	return sanitizeType(typ), msg
}

// sanitizeType strips the qualifiers AWS adds to an error type: the part
// after ':' and before '#'.
func sanitizeType(t string) string {
	t, _, _ = strings.Cut(t, ":")
	if _, after, ok := strings.Cut(t, "#"); ok {
		t = after
	}
	return t
}

// httpError classifies a non-2xx response (reading and closing its body):
// by status first (providers.HTTPError), then by the AWS error type where
// it says more than the status does.
func httpError(resp *http.Response) *providers.Error {
	var typ string
	e := providers.HTTPError(ID, resp, func(body []byte) string {
		t, msg := apiError(resp.Header, body)
		typ = t
		switch {
		case t != "" && msg != "":
			return t + ": " + msg
		case t != "":
			return t
		}
		return msg
	})
	if k, ok := kindOf(typ, e.Message); ok {
		e.Kind = k
	}
	return e
}

// kindOf maps an AWS error or exception type (either case of its first
// letter: HTTP errors say "ThrottlingException", stream exceptions
// "throttlingException") to a Kind; ok is false for types the status
// classifies well enough.
func kindOf(typ, msg string) (providers.Kind, bool) {
	switch strings.ToLower(typ) {
	case "throttlingexception", "servicequotaexceededexception":
		// ServiceQuotaExceededException comes as a 400, but resubmitting
		// later is what it asks for.
		return providers.KindRateLimit, true
	case "serviceunavailableexception", "internalserverexception", "modelnotreadyexception":
		return providers.KindUnavailable, true
	case "modeltimeoutexception":
		return providers.KindTimeout, true
	case "accessdeniedexception", "unrecognizedclientexception", "invalidsignatureexception",
		"expiredtokenexception", "incompletesignatureexception", "missingauthenticationtokenexception":
		return providers.KindAuth, true
	case "validationexception":
		if providers.IsContextLength(msg) {
			return providers.KindContextLength, true
		}
		return providers.KindBadRequest, true
	}
	return "", false
}

// streamException classifies an exception message inside the event
// stream from its type and JSON payload. modelStreamErrorException carries
// the model's own status and message, used when present.
func streamException(typ string, payload []byte) *providers.Error {
	var b struct {
		Message            string `json:"message"`
		OriginalStatusCode int    `json:"originalStatusCode"`
		OriginalMessage    string `json:"originalMessage"`
	}
	_ = json.Unmarshal(payload, &b) // a payload that is not JSON leaves b empty
	msg := b.Message
	if b.OriginalMessage != "" && b.OriginalMessage != msg {
		msg = strings.TrimSpace(msg + " " + b.OriginalMessage)
	}
	return streamError(typ, msg, b.OriginalStatusCode)
}

// streamError classifies a failure the stream reported after its HTTP 200:
// by its type, else by status (the model's, or 0), else as the API being
// unavailable.
func streamError(typ, msg string, status int) *providers.Error {
	e := &providers.Error{Provider: ID, Kind: providers.KindUnavailable, Message: typ}
	if msg != "" {
		e.Message = typ + ": " + msg
	}
	if k, ok := kindOf(typ, msg); ok {
		e.Kind = k
	} else if status != 0 {
		resp := &http.Response{StatusCode: status, Header: http.Header{}, Body: http.NoBody}
		e.Kind = providers.HTTPError(ID, resp, func([]byte) string { return msg }).Kind
	}
	return e
}
