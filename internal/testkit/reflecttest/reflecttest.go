// Package reflecttest fills values by reflection for tests that check a door keeps every field of
// a type (the result, say): a field added later is covered without the test changing. Test-only.
package reflecttest

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// Filled returns a T whose every exported field, at every depth, holds a value other than its
// zero value, so that a field a door leaves out shows as missing.
func Filled[T any](t testing.TB) T {
	t.Helper()
	var v T
	fill(t, reflect.ValueOf(&v).Elem())
	return v
}

func fill(t testing.TB, v reflect.Value) {
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
			// A field tagged json:"-" stays where it was made (guard.Result's Measured, on the
			// sandbox host): no door carries it, so it is left zero.
			if f := v.Type().Field(i); f.IsExported() && f.Tag.Get("json") != "-" {
				fill(t, v.Field(i))
			}
		}
	default:
		t.Fatalf("reflecttest: no value for a %s", v.Type())
	}
}

// JSONNames are the JSON names of T's fields (a struct type), in declaration order.
func JSONNames[T any]() []string {
	var names []string
	rt := reflect.TypeFor[T]()
	for i := range rt.NumField() {
		if name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}
