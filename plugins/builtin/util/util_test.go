package util

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/plugins/toolset"
)

func TestCalc(t *testing.T) {
	for expr, want := range map[string]string{
		"1 + 2":                      "3",
		"(1.5 + 2) * 4":              "14",
		"7 / 2":                      "3.5",
		"1 / 3":                      "0.333333333333333 (exactly 1/3)",
		"-(2 - 5) % 2":               "1",
		"0.1 + 0.2":                  "0.3",
		"9e300 * 9e300 / 1e300":      "81" + strings.Repeat("0", 300),
		"2 * 3.5e2":                  "700",
		"123456789012345678901 * 10": "1234567890123456789010",
		"0x1p4 + 0x1.8p1":            "19",
		"0x1p-2":                     "0.25",
		"0xe + 0XE":                  "28",
	} {
		got, err := Calc(expr)
		if err != nil || got != want {
			t.Errorf("Calc(%q) = %q, %v; want %q", expr, got, err, want)
		}
	}
	for expr, want := range map[string]string{
		"":                                 "empty",
		"1 / 0":                            "division by zero",
		"1.5 % 2":                          "% needs integers",
		"x + 1":                            "only numbers",
		"1 << 3":                           "operator << is not supported",
		`"a" + "b"`:                        "is not a number",
		"1e999999999":                      "exponent out of range",
		"1e401":                            "exponent out of range (at most 400)",
		"0x1p100000":                       "exponent out of range (at most 400)",
		"0x1p-100000":                      "exponent out of range (at most 400)",
		"0X1P401":                          "exponent out of range (at most 400)",
		"os.Exit(1)":                       "only numbers",
		"1 +":                              "not an arithmetic expression",
		strings.Repeat("9", 1001):          "longer than",
		strings.Repeat("9e400*", 20) + "9": "too large",
	} {
		if _, err := Calc(expr); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Calc(%.30q) error %v; want it to mention %q", expr, err, want)
		}
	}
}

func TestNow(t *testing.T) {
	now := Tools()[1]
	call := func(args string) (string, bool) {
		res, err := now.Call(context.Background(), json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		return res.Text(), res.IsError
	}
	if out, failed := call(`{"timezone":"Asia/Tokyo"}`); failed || !strings.Contains(out, "+09:00") || !strings.Contains(out, "Asia/Tokyo") {
		t.Errorf("now in Tokyo: %q, failed %v", out, failed)
	}
	out, failed := call("")
	if failed {
		t.Fatal(out)
	}
	ts, err := time.Parse(time.RFC3339, strings.Fields(out)[0])
	if err != nil || time.Since(ts).Abs() > time.Minute {
		t.Errorf("now: %q (%v)", out, err)
	}
	if out, failed := call(`{"timezone":"Mars/Olympus"}`); !failed || out != `unknown time zone "Mars/Olympus" (use an IANA name such as Europe/Oslo)` {
		t.Errorf("an unknown time zone: %q, failed %v", out, failed)
	}
}

// TestToolset: the tools as the server serves them (toolset.Of): their
// specs, answers and failures, which are the tools' own (never a
// transport error).
func TestToolset(t *testing.T) {
	ts := toolset.Of(Tools()...)
	ctx := context.Background()
	specs, err := ts.Tools(ctx)
	if err != nil || len(specs) != 2 || specs[0].Name != "calc" || specs[1].Name != "now" || !specs[0].Idempotent || !specs[1].Idempotent ||
		!json.Valid(specs[0].Schema) || !strings.Contains(string(specs[0].Schema), `"required":["expression"]`) {
		t.Fatalf("specs %+v, %v", specs, err)
	}
	specs[0].Schema[0] = 'x'
	if again, _ := ts.Tools(ctx); again[0].Schema[0] != '{' {
		t.Error("a caller's change to a spec reached the tool")
	}
	if out, err := ts.Call(ctx, "calc", json.RawMessage(`{"expression":"(1.5 + 2) * 4 / 3"}`)); err != nil || out.IsError || out.Text() != "4.66666666666667 (exactly 14/3)" {
		t.Errorf("calc = %+v, %v", out, err)
	}
	for _, tt := range []struct{ tool, args, want string }{
		{"calc", `{"expression":"1 / 0"}`, "division by zero"},
		{"calc", ``, "arguments: unexpected end of JSON input"},
		{"calc", `{"expression":"x"}`, "only numbers, + - * / % and parentheses are allowed"},
		{"now", `[1]`, "arguments: json: cannot unmarshal array into Go value"},
		{"sum", `{}`, `unknown tool "sum"`},
	} {
		res, err := ts.Call(ctx, tt.tool, json.RawMessage(tt.args))
		if err != nil || !res.IsError || !strings.HasPrefix(res.Text(), tt.want) {
			t.Errorf("%s %s: %+v, %v; want the tool's failure %q", tt.tool, tt.args, res, err, tt.want)
		}
	}
}
