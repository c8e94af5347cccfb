package main

import (
	"bytes"
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

// jsonNames are the JSON names of T's fields.
func jsonNames[T any]() []string {
	var names []string
	rt := reflect.TypeFor[T]()
	for i := range rt.NumField() {
		if name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// TestPrintResultKeepsEveryField: `starter result`, `run --wait` and `approve --wait` print every
// field of the result (walked by reflection, so a field added later is covered), and what they
// print reads back as the same result.
func TestPrintResultKeepsEveryField(t *testing.T) {
	res := filled[guard.Result](t)
	res.Outcome, res.Duration = guard.OutcomeFailed, 1500*time.Millisecond
	var out bytes.Buffer
	if err := printResult(&out, res); err != nil {
		t.Fatal(err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(out.Bytes(), &keys); err != nil {
		t.Fatalf("printed %s: %v", out.Bytes(), err)
	}
	for _, name := range append(jsonNames[guard.Result](), "duration_ms") {
		if _, ok := keys[name]; !ok {
			t.Errorf("printed result lacks %q: %s", name, out.Bytes())
		}
	}
	var back guard.Result
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, res) {
		t.Errorf("printed result reads back as %+v; want %+v", back, res)
	}
}
