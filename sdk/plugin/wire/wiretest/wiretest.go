// Package wiretest checks that JSON payloads keep their shape: the golden
// files of the plugin contracts (sdk/plugin/wire) and of the payloads of
// older protocols the host keeps (plugins/wireconv/protocol2). A payload
// is a compiled plugin's promise, so a renamed, retyped or dropped field
// must fail a test.
package wiretest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Golden compares the indented JSON of every value of values with its
// golden file, dir/<name>.json, and decodes the file back, refusing
// unknown fields, into a value that encodes the same. With update it
// writes the files first. It also fails for a golden file in dir that no
// value writes (a payload dropped without a thought for the plugins that
// send it).
func Golden(t *testing.T, dir string, values map[string]any, update bool) {
	t.Helper()
	for name, v := range values {
		t.Run(name, func(t *testing.T) {
			got, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			file := filepath.Join(dir, name+".json")
			if update {
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%T encodes as\n%s\nwant (%s)\n%s\na field's JSON name or type changed: compiled plugins would no longer be understood", v, got, file, want)
			}
			back := reflect.New(reflect.TypeOf(v))
			dec := json.NewDecoder(bytes.NewReader(want))
			dec.DisallowUnknownFields()
			if err := dec.Decode(back.Interface()); err != nil {
				t.Fatalf("decode %s: %v", file, err)
			}
			again, _ := json.Marshal(back.Interface())
			if orig, _ := json.Marshal(v); !bytes.Equal(again, orig) {
				t.Errorf("%s decodes as %s, want %s", file, again, orig)
			}
		})
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		if _, ok := values[name[:len(name)-len(".json")]]; !ok {
			t.Errorf("%s has no value in the test", f)
		}
	}
}
