package plugins

import (
	"reflect"
	"slices"
	"testing"
)

func TestParsePermissions(t *testing.T) {
	perms, errs := ParsePermissions("a.permissions", []byte(`{"network":["api.example.com"],"env":["TOKEN"],"exec":true}`), RuntimeProcess)
	want := Permissions{Network: []string{"api.example.com"}, Env: []string{"TOKEN"}, Exec: true}
	if len(errs) != 0 || !reflect.DeepEqual(perms, want) {
		t.Errorf("got %+v %v, want %+v and no problems", perms, errs, want)
	}
	// The runtime's rules apply, and every problem has its path under the
	// field given; no defaults are filled in.
	_, errs = ParsePermissions("a.permissions", []byte(`{"network":["x.com","x.com"],"exec":true,"memory_mib":0,"extra":1}`), RuntimeWASM)
	var fields []string
	for _, fe := range errs {
		fields = append(fields, fe.Field)
	}
	if want := []string{"a.permissions.extra", "a.permissions.network[1]", "a.permissions.exec", "a.permissions.memory_mib"}; !slices.Equal(fields, want) {
		t.Errorf("fields %q, want %q", fields, want)
	}
	if _, errs = ParsePermissions("p", []byte(`[]`), RuntimeData); len(errs) != 1 || errs[0].Field != "p" {
		t.Errorf("an array: %v", errs)
	}
	if perms, errs = ParsePermissions("p", []byte(`{}`), RuntimeWASM); len(errs) != 0 || !reflect.DeepEqual(perms, Permissions{}) {
		t.Errorf("empty: %+v %v", perms, errs)
	}
}
