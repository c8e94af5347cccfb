package mcpserver

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// filled returns a T whose every field, at every depth, holds a value other than its zero value,
// so that a field a door leaves out shows as missing.
func filled[T any](t *testing.T) T {
	t.Helper()
	var v T
	fill(t, reflect.ValueOf(&v).Elem())
	return v
}

func fill(t *testing.T, v reflect.Value) {
	t.Helper()
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.String:
		v.SetString("x")
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i))
			}
		}
	default:
		t.Fatalf("fill: no value for a %s", v.Type())
	}
}

// TestStructuredResultKeepsEveryField: the run_code tool's structured content holds every field
// of the result (walked by reflection), the produced files by name and size, their contents only
// as embedded resources.
func TestStructuredResultKeepsEveryField(t *testing.T) {
	res := filled[guard.Result](t)
	res.Outcome, res.Duration = guard.OutcomeFailed, 1500*time.Millisecond
	out := resultContent("sandbox-1", res)
	b, err := json.Marshal(out.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	rt := reflect.TypeFor[guard.Result]()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if _, ok := keys[name]; !ok && name != "-" {
			t.Errorf("structured content lacks %q: %s", name, b)
		}
	}
	var back guard.Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	want := res
	want.Files = []guard.File{{Name: res.Files[0].Name, Size: res.Files[0].Size}}
	if !reflect.DeepEqual(back, want) {
		t.Errorf("structured content reads back as %+v; want %+v", back, want)
	}
	if res.Files[0].Content == nil {
		t.Errorf("resultContent changed the caller's files")
	}
	if len(out.Content) != 4 {
		t.Errorf("content has %d parts; want summary, stdout, stderr and one file", len(out.Content))
	}
}
