package core

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Redacted replaces every secret a Redactor finds.
const Redacted = "[REDACTED]"

// minSecretLen is the shortest registered secret that is redacted: a
// shorter value would blank out ordinary words.
const minSecretLen = 8

// Redactor removes secrets from text before it is stored, sent or logged:
// every value registered with SetSecret (the API token, provider keys,
// webhook secrets), literally and in its JSON-escaped forms, and strings
// that look like credentials whoever they belong to (credentialPatterns:
// bearer tokens, the key formats of the common vendors, api_key=... pairs,
// passwords in URLs). Kiln passes every error, event, message, log record
// and API answer through one Redactor.
//
// A Redactor is safe for concurrent use. A nil *Redactor still removes what
// looks like a credential; it only knows no registered values.
type Redactor struct {
	mu    sync.Mutex
	named map[string]string         // name -> registered value
	set   atomic.Pointer[secretSet] // what Redact uses; replaced on change
}

// secretSet is an immutable snapshot of the registered values, longest
// first (so a secret that contains another is replaced whole), with their
// JSON-escaped forms.
type secretSet struct {
	values []string
	bytes  [][]byte
}

// NewRedactor returns a Redactor with no registered secrets.
func NewRedactor() *Redactor { return &Redactor{named: map[string]string{}} }

// SetSecret registers value under name ("provider openai api_key"),
// replacing what name had; an empty value forgets name. Values shorter
// than 8 characters are not redacted. On a nil Redactor it does nothing.
func (r *Redactor) SetSecret(name, value string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.named[name] == value {
		return
	}
	if value == "" {
		delete(r.named, name)
	} else {
		r.named[name] = value
	}
	seen := map[string]bool{}
	var vals []string
	for _, v := range r.named {
		for _, form := range secretForms(v) {
			if len(form) >= minSecretLen && !seen[form] {
				seen[form] = true
				vals = append(vals, form)
			}
		}
	}
	slices.SortFunc(vals, func(a, b string) int { return len(b) - len(a) })
	set := &secretSet{values: vals, bytes: make([][]byte, len(vals))}
	for i, v := range vals {
		set.bytes[i] = []byte(v)
	}
	r.set.Store(set)
}

// secretForms are the ways a value appears in text: as it is, and escaped
// inside a JSON string (encoding/json also escapes <, > and &).
func secretForms(v string) []string {
	forms := []string{v}
	b, _ := json.Marshal(v)
	forms = append(forms, string(b[1:len(b)-1]))
	var plain bytes.Buffer
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	if s := strings.TrimSpace(plain.String()); len(s) >= 2 {
		forms = append(forms, s[1:len(s)-1])
	}
	return forms
}

// credentialPatterns match what looks like a credential in any text. A
// match keeps its group 1 (a label such as "Bearer " or "api_key=") and
// group 3 (a delimiter), and its group 2, the credential, is replaced
// unless keep says it is not one. A pattern runs only on text that has
// one of its hints (lower-case; case is ignored), which most text has not.
var credentialPatterns = []struct {
	re    *regexp.Regexp
	hints []string
	keep  func(secret string) bool
}{
	// Authorization schemes: "Bearer eyJ...", "Basic dXNlcjpwYXNz"; the
	// token must have a digit, so "Bearer authentication" stays.
	{re: regexp.MustCompile(`(?i)(\b(?:bearer|basic)\s+)([A-Za-z0-9._~+/-]{12,}=*)()`), hints: []string{"bearer", "basic"}, keep: noDigit},
	// Vendor key formats: OpenAI and Anthropic (sk-, sk-proj-, sk-ant-),
	// OpenRouter (sk-or-), AWS access key IDs, Google API keys, GitHub and
	// Slack tokens.
	{re: regexp.MustCompile(`()(\bsk-[A-Za-z0-9_-]{16,})()`), hints: []string{"sk-"}},
	{re: regexp.MustCompile(`()(\b(?:AKIA|ASIA)[0-9A-Z]{16})\b()`), hints: []string{"akia", "asia"}},
	{re: regexp.MustCompile(`()(\bAIza[0-9A-Za-z_-]{35})()`), hints: []string{"aiza"}},
	{re: regexp.MustCompile(`()(\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}))()`), hints: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}},
	{re: regexp.MustCompile(`()(\bxox[abposr]-[A-Za-z0-9-]{10,})()`), hints: []string{"xox"}},
	// key=value and "key": "value" for key-like names, in text, headers,
	// JSON (escaped or not) and query strings (Gemini takes ?key=). An
	// environment reference ("${OPENAI_API_KEY}") is not a secret.
	{re: regexp.MustCompile(`(?i)(\b(?:api[_-]?key|x-api-key|access[_-]?token|auth[_-]?token|refresh[_-]?token|secret[_-]?access[_-]?key|session[_-]?token|client[_-]?secret|password|passwd)\\?["']?\s*[:=]\s*\\?["']?)([^\s"'\\&,;]{6,})()`),
		hints: keyHints("api?key", "access?token", "auth?token", "refresh?token", "secret?access?key", "session?token", "client?secret", "password", "passwd"), keep: envReference},
	{re: regexp.MustCompile(`([?&](?:key|api_key|apikey|token|access_token|sig|signature)=)([^&\s"'\\]{6,})()`), hints: []string{"key=", "token=", "sig=", "signature="}, keep: envReference},
	// A password in a URL: scheme://user:password@host.
	{re: regexp.MustCompile(`(://[^/\s:@"']+:)([^@\s/"']+)(@)`), hints: []string{"://"}},
}

// keyHints spells each name with each "?" as nothing, "_" and "-".
func keyHints(names ...string) []string {
	var out []string
	for _, n := range names {
		parts := strings.Split(n, "?")
		forms := []string{parts[0]}
		for _, part := range parts[1:] {
			var next []string
			for _, f := range forms {
				for _, sep := range []string{"", "_", "-"} {
					next = append(next, f+sep+part)
				}
			}
			forms = next
		}
		out = append(out, forms...)
	}
	return out
}

func noDigit(s string) bool { return !strings.ContainsAny(s, "0123456789") }

func envReference(s string) bool { return strings.HasPrefix(s, "${") || s == Redacted }

// Redact returns s with every secret replaced by [REDACTED].
func (r *Redactor) Redact(s string) string {
	if s == "" {
		return s
	}
	if r != nil {
		if set := r.set.Load(); set != nil {
			for _, v := range set.values {
				if strings.Contains(s, v) {
					s = strings.ReplaceAll(s, v, Redacted)
				}
			}
		}
	}
	hinted := hints(s)
	if hinted == 0 {
		return s
	}
	for i, p := range credentialPatterns {
		if hinted&(1<<i) == 0 {
			continue
		}
		s = p.re.ReplaceAllStringFunc(s, func(m string) string {
			g := p.re.FindStringSubmatch(m)
			if p.keep != nil && p.keep(g[2]) {
				return m
			}
			return g[1] + Redacted + g[3]
		})
	}
	return s
}

// RedactBytes is Redact for bytes. It returns b itself when nothing in it
// is a secret.
func (r *Redactor) RedactBytes(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	found := false
	if r != nil {
		if set := r.set.Load(); set != nil {
			for _, v := range set.bytes {
				if bytes.Contains(b, v) {
					found = true
					break
				}
			}
		}
	}
	if !found && hints(b) == 0 {
		return b
	}
	out := r.Redact(string(b))
	if out == string(b) {
		return b
	}
	return []byte(out)
}

// RedactJSON redacts a JSON document. The result is still valid JSON: a
// secret is replaced inside its string by [REDACTED].
func (r *Redactor) RedactJSON(b json.RawMessage) json.RawMessage {
	return r.RedactBytes(b)
}

// hint is a lower-case string and the patterns it points to.
type hint struct {
	text     string
	patterns uint32 // bit i: credentialPatterns[i]
}

// hintGroups are the hints by their first two bytes: hintIndex maps the
// two bytes, lowered, to 1 + the index of their group (0: none), so hints
// looks at each byte of a text once and at a hint only where its first
// two bytes are.
var hintGroups, hintIndex = func() ([][]hint, *[1 << 16]uint8) {
	var groups [][]hint
	var index [1 << 16]uint8
	for i, p := range credentialPatterns {
		for _, h := range p.hints {
			k := uint16(h[0])<<8 | uint16(h[1])
			if index[k] == 0 {
				groups = append(groups, nil)
				index[k] = uint8(len(groups))
			}
			g := index[k] - 1
			groups[g] = append(groups[g], hint{h, 1 << i})
		}
	}
	return groups, &index
}()

// hints returns the set of credentialPatterns whose hints text contains,
// ignoring ASCII case, without allocating.
func hints[T string | []byte](text T) (set uint32) {
	for i := 0; i+1 < len(text); i++ {
		g := hintIndex[uint16(lower(text[i]))<<8|uint16(lower(text[i+1]))]
		if g == 0 {
			continue
		}
		for _, h := range hintGroups[g-1] {
			if set&h.patterns == 0 && hasPrefixFold(text[i+2:], h.text[2:]) {
				set |= h.patterns
			}
		}
	}
	return set
}

// lower lowers an ASCII letter.
func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// hasPrefixFold reports whether text starts with the lower-case ASCII
// prefix in any ASCII case.
func hasPrefixFold[T string | []byte](text T, prefix string) bool {
	if len(text) < len(prefix) {
		return false
	}
	for j := 0; j < len(prefix); j++ {
		c := text[j]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[j] {
			return false
		}
	}
	return true
}
