package plugins

import (
	"strings"
	"testing"
)

func TestTable(t *testing.T) {
	var tab Table[Capability, any]
	tab.Register("test.Register", "a", 1)
	if v, ok := tab.Lookup("a"); !ok || v != 1 {
		t.Errorf("Lookup(a) = %v, %v", v, ok)
	}
	if _, ok := tab.Lookup("b"); ok {
		t.Error("Lookup(b) found what was never registered")
	}
	all := tab.All()
	all["b"] = 2
	if _, ok := tab.Lookup("b"); ok || len(tab.All()) != 1 {
		t.Error("All returned the table itself, not a copy")
	}
	for _, tc := range []struct {
		name Capability
		v    any
		want string
	}{
		{"a", 2, `test.Register: "a" registered twice`},
		{"", 2, "test.Register: empty name or nil value"},
		{"c", nil, "test.Register: empty name or nil value"},
	} {
		func() {
			defer func() {
				if r, _ := recover().(string); !strings.Contains(r, tc.want) {
					t.Errorf("Register(%q, %v) panicked with %q, want %q", tc.name, tc.v, r, tc.want)
				}
			}()
			tab.Register("test.Register", tc.name, tc.v)
		}()
	}
}
