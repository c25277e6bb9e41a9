package web

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
)

// fuzzDecoder checks the contract of a request body parser on arbitrary
// input: it never panics, and a value it accepts re-encodes to a body it
// accepts again, which encodes the same (decoding is canonical).
func fuzzDecoder[T any](f *testing.F, parse func([]byte) (T, error), seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := parse(body)
		if err != nil {
			if code, _ := classify(err); statusOf(code) != 400 {
				t.Fatalf("parse(%q) failed with %s (%v), want a 400 error", body, code, err)
			}
			return
		}
		first, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("re-encode %#v: %v", v, err)
		}
		again, err := parse(first)
		if err != nil {
			t.Fatalf("parse(%q) accepted %q but rejects its re-encoding %q: %v", body, body, first, err)
		}
		second, err := json.Marshal(again)
		if err != nil {
			t.Fatalf("re-encode %#v: %v", again, err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("not canonical: %q -> %q -> %q", body, first, second)
		}
	})
}

func FuzzDecodeRunRequest(f *testing.F) {
	fuzzDecoder(f, parseRunRequest,
		`{"input":{"text":"tool echo {\"a\":1}\ntext done"}}`,
		`{"input":{"text":"x"},"model":"scripted","limits":{"max_steps":5,"max_tool_calls":2}}`,
		`{"input":{"text":"x"},"interrupt_on":{"append_file":true,"e*":false,"sleep":{"allowed_decisions":["approve","reject"]}}}`,
		`{"input":{"text":"x"},"interrupt_on":{"echo":{"allowed_decisions":[]}}}`,
		`{"input":{"text":"x"},"interrupt_on":{"[":true}}`,
		`{"input":null,"interrupt_on":null}`,
		`{"input":{"text":"\ud800"}}`,
		`{"input":{"text":"x"}} trailing`,
		`{"input":{"text":1}}`,
		`{"limits":{"max_steps":1e3}}`,
		`[]`, `null`, `{`, ``, `{"input":{"text":"x","more":1}}`,
	)
}

func FuzzDecodeDecision(f *testing.F) {
	fuzzDecoder(f, parseDecision,
		`{"decision":"approve"}`,
		`{"decision":"edit","args":{"path":"a.txt","line":"<b>&</b>"}}`,
		`{"decision":"edit","args": { "nested" : [1, 2.50, {"x": null}] } }`,
		`{"decision":"reject","message":"no"}`,
		`{"decision":"respond","message":"done","args":null}`,
		`{"decision":"retry"}`, `{"decision":"skip"}`,
		`{"decision":"maybe"}`, `{"decision":"approve","by":"x"}`,
		`{"decision":"edit","args":"str"}`, `{"decision":"edit","args":[1]}`,
		`{"decision":"approve"}{"decision":"approve"}`,
	)
}

func FuzzDecodeThreadPatch(f *testing.F) {
	fuzzDecoder(f, parseThreadPatch,
		`{}`, `{"title":"x"}`, `{"folder_id":null}`, `{"folder_id":""}`, `{"folder_id":"fld_1"}`,
		`{"pinned":true,"title":null}`, `{"folder_id":1}`, `{"folder_id":{}}`, `{"title":"a","title":"b"}`,
		`{"folder_id":"\u00e9\ud83d\ude00"}`, `{"folder_id" : null , "pinned" : false }`,
	)
}

func FuzzDecodeThreadInput(f *testing.F) {
	fuzzDecoder(f, parseThreadInput, `{}`, `{"title":"t","folder_id":"f","pinned":true}`, `{"title":null}`, `{"pinned":"yes"}`)
}

func FuzzDecodeFolderInput(f *testing.F) {
	fuzzDecoder(f, parseFolderInput, `{"name":"n"}`, `{"name":"n","position":-3}`, `{"position":null}`, `{"name":1}`)
}

func FuzzDecodeFolderPatch(f *testing.F) {
	fuzzDecoder(f, parseFolderPatch, `{}`, `{"name":"n"}`, `{"position":0}`, `{"position":9223372036854775808}`)
}

func FuzzDecodeInstallRequest(f *testing.F) {
	fuzzDecoder(f, parseInstallRequest,
		`{"path":"/srv/plugins/weather","consent":true}`,
		`{"path":"/p","consent":true,"sha256":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","disabled":true}`,
		`{"path":"/p","consent":false,"sha256":""}`, `{"path":"/p","sha256":"ABC"}`, `{"path":"rel/dir","consent":true}`,
		`{"path":""}`, `{"consent":true}`, `{"path":"/p","consent":"yes"}`, `{"path":"/p","force":true}`,
		`{"path":"/p\u0000x","consent":true}`, `{"path":"/\u00e9\ud83d\ude00"}`, `{"path":null}`,
	)
}

func FuzzDecodePreviewRequest(f *testing.F) {
	fuzzDecoder(f, parsePreviewRequest, `{"path":"/srv/plugins/weather"}`, `{"path":"."}`, `{"path":1}`, `{}`, `{"path":"/p","x":1}`)
}

func FuzzDecodeConfigInput(f *testing.F) {
	fuzzDecoder(f, parseConfigInput,
		`{"settings":{"api_key":"${OPENAI_API_KEY}","base_url":"https://api.openai.com/v1"}}`,
		`{"settings":{"api_key":"sk-literal","api":"responses","region":"eu-central-1","profile":"work","auth":"bearer"}}`,
		`{"settings":{}}`, `{"settings":{"api_key":""}}`, `{"settings":{"api_key":null}}`, `{"settings":null}`, `{}`,
		`{"settings":{"a":"x","a":"y"}}`, `{"settings":{"":"x"}}`, `{"settings":{"a b":"x"}}`, `{"settings":{"api":1}}`,
		`{"settings":[]}`, `{"settings":{},"api_key":"x"}`, `{"settings":{"k":"\u00e9\ud83d\ude00\ud800"}}`,
	)
}

// FuzzCheckJSONText: a body checkJSONText accepts decodes without
// encoding/json replacing anything by U+FFFD (a U+FFFD in the result was
// in the input, literally or escaped), and it refuses no well-formed JSON
// of valid UTF-8 without unpaired surrogates.
func FuzzCheckJSONText(f *testing.F) {
	for _, s := range []string{`{"a":"x"}`, `{"a":"\ud83d\ude00"}`, `{"a":"\ud800"}`, `{"a":"\udc00\ud800"}`, "{\"a\":\"\xff\"}",
		`{"a":"\\ud800"}`, `{"a":"\ufffd"}`, "{\"a\":\"\xef\xbf\xbd\"}", `{"\ud800":1}`, `["\ud800x"]`, `{"a":"\ud800\u0041"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if checkJSONText(b) != nil || !json.Valid(b) {
			return
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("valid JSON did not decode: %v", err)
		}
		hadFFFD := bytes.Contains(b, []byte("\ufffd")) || bytes.Contains(bytes.ToLower(b), []byte(`\ufffd`))
		var walk func(any)
		walk = func(x any) {
			switch x := x.(type) {
			case string:
				if strings.ContainsRune(x, utf8.RuneError) && !hadFFFD {
					t.Fatalf("%q decoded to %q: a replacement character the input did not have", b, x)
				}
			case []any:
				for _, y := range x {
					walk(y)
				}
			case map[string]any:
				for k, y := range x {
					walk(k)
					walk(y)
				}
			}
		}
		walk(v)
	})
}

// FuzzSniff checks that an upload's type is an image type models take or
// text, whatever the bytes and the name, and that text is valid UTF-8
// (but for a rune cut at the end of the sniffed head).
func FuzzSniff(f *testing.F) {
	f.Add(tinyPNG, "dot.png")
	f.Add([]byte("a,b\n1,2\n"), "x.csv")
	f.Add([]byte("\x7fELF\x00"), "x")
	f.Add([]byte("h\xc3"), "cut.txt")
	f.Fuzz(func(t *testing.T, head []byte, name string) {
		if len(head) > 512 {
			head = head[:512]
		}
		typ, err := sniff(head, name)
		if err != nil {
			if typ != "" {
				t.Fatalf("refused with a type %q", typ)
			}
			return
		}
		if !imageTypes[typ] && !core.IsText(head, false) {
			t.Fatalf("%q accepted as %s", head, typ)
		}
	})
}
