package sqlite

import (
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// TestDriverValue checks that the writer passes each kind of argument to
// the driver as database/sql would (driver.DefaultParameterConverter, for
// go-sqlite3 checks no values itself).
func TestDriverValue(t *testing.T) {
	var nilText *string
	text := "x"
	for _, a := range []any{
		nil, int64(-7), 42, "text", "", true, false, []byte("raw"), []byte(nil), 1.5,
		time.Date(2026, 12, 6, 1, 2, 3, 4, time.UTC), json.RawMessage(`{"a":1}`), core.RunRunning,
		sql.NullString{}, sql.NullString{String: "s", Valid: true}, sql.NullInt64{Int64: 3, Valid: true},
		nilText, &text, int32(5), uint8(6),
	} {
		got, err := driverValue(a)
		want, werr := driver.DefaultParameterConverter.ConvertValue(a)
		if (err != nil) != (werr != nil) || !reflect.DeepEqual(got, want) || reflect.TypeOf(got) != reflect.TypeOf(want) {
			t.Errorf("driverValue(%#v) = %#v, %v; database/sql passes %#v, %v", a, got, err, want, werr)
		}
	}
	if _, err := driverValue(struct{}{}); err == nil {
		t.Error("driverValue of a struct: no error")
	}
}
