package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/providertest"
)

// A full agent run: the model asks for echo {"text":"hi"}, gets its
// result back in the second request, and answers in text.
func TestAgentRun(t *testing.T) {
	f, p := newFake(t, func(n int, w http.ResponseWriter, r *http.Request, body []byte) {
		switch n {
		case 0:
			streamOf("tool")(n, w, r, body)
		case 1:
			var req struct {
				Messages []struct {
					Role    string
					Content []struct {
						ToolResult *struct {
							ToolUseID string
							Content   []struct{ Text string }
							Status    string
						}
					}
				}
			}
			if err := json.Unmarshal(body, &req); err != nil {
				t.Error(err)
			}
			last := req.Messages[len(req.Messages)-1]
			if last.Role != "user" || len(last.Content) != 1 || last.Content[0].ToolResult == nil ||
				last.Content[0].ToolResult.ToolUseID != "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q" || last.Content[0].ToolResult.Status != "" ||
				!strings.Contains(last.Content[0].ToolResult.Content[0].Text, "hi") {
				t.Errorf("second request does not carry the echo result: %s", body)
			}
			streamOf("text")(n, w, r, body)
		default:
			t.Errorf("unexpected request %d", n)
			w.WriteHeader(500)
		}
	})
	res := providertest.RunAgent(t, ID, p, testModel, "Echo hi, then say hello.")
	providertest.CheckAgentRun(t, res, "Hello from Bedrock.", core.Usage{InputTokens: 397 + 42, OutputTokens: 71 + 7})
	f.WantRequests(t, 2)
}

// The fake's signature check is a real check: a wrong secret, a body
// changed after signing and a stale date each fail it.
func TestFakeRejectsBadSignatures(t *testing.T) {
	f := &fakeBedrock{t: t, region: DefaultRegion, creds: &testCreds}
	signed := func(creds aws.Credentials, body string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "http://bedrock.test/model/m%3A0/converse-stream", nil)
		r.Header.Set("Content-Type", "application/json")
		if err := signV4(context.Background(), r, []byte(body), creds, "bedrock", DefaultRegion, time.Now()); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if err := f.checkAuth(signed(testCreds, `{"a":1}`), []byte(`{"a":1}`)); err != nil {
		t.Fatalf("good signature refused: %v", err)
	}
	wrong := testCreds
	wrong.SecretAccessKey = "other"
	if err := f.checkAuth(signed(wrong, `{"a":1}`), []byte(`{"a":1}`)); err == nil {
		t.Error("wrong secret accepted")
	}
	if err := f.checkAuth(signed(testCreds, `{"a":1}`), []byte(`{"a":2}`)); err == nil {
		t.Error("changed body accepted")
	}
	r := signed(testCreds, `{}`)
	r.Header.Set("X-Amz-Date", "20200101T000000Z")
	if err := f.checkAuth(r, []byte(`{}`)); err == nil {
		t.Error("changed date accepted")
	}
	// And through the provider: a wrong secret comes back as AWS's 403.
	f2, p := newFake(t, streamOf("text"))
	f2.badAuth = true
	p.(*Provider).auth.static.SecretAccessKey = "other"
	_, err := p.Turn(context.Background(), testModel, providertest.UserTurn("hi"), nil)
	if pe := providertest.AsError(t, err); pe.Kind != providers.KindAuth || pe.Status != 403 || !strings.HasPrefix(pe.Message, "InvalidSignatureException: signature mismatch") {
		t.Errorf("%+v", pe)
	}
}

// FuzzReadStream feeds arbitrary bytes (seeded with the fixtures and
// their corruptions) to the stream reader: it must return, never panic.
func FuzzReadStream(f *testing.F) {
	for _, name := range []string{"text", "tool", "two_tools", "throttling", "corrupt-crc"} {
		data := streamFixture(f, name)
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		names := providers.NewToolNames([]core.ToolSpec{echoTool, addTool}, nil)
		resp, err := readStream(bytes.NewReader(data), names, func(string) {})
		if err == nil {
			for _, c := range resp.ToolCalls {
				if !json.Valid(c.Args) {
					t.Errorf("invalid args %q", c.Args)
				}
			}
		}
	})
}
