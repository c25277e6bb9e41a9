package util

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
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
	tools := Toolset().Tools
	now := tools[1].Handler
	res, err := now(context.Background(), json.RawMessage(`{"timezone":"Asia/Tokyo"}`))
	out := res.Text()
	if err != nil || !strings.Contains(out, "+09:00") || !strings.Contains(out, "Asia/Tokyo") {
		t.Errorf("now in Tokyo: %q, %v", out, err)
	}
	res, err = now(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out = res.Text()
	ts, err := time.Parse(time.RFC3339, strings.Fields(out)[0])
	if err != nil || time.Since(ts).Abs() > time.Minute {
		t.Errorf("now: %q (%v)", out, err)
	}
	if _, err := now(context.Background(), json.RawMessage(`{"timezone":"Mars/Olympus"}`)); err == nil {
		t.Error("an unknown time zone was accepted")
	}
}
