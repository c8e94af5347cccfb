// Package defaults fills the unset fields of an options struct from a value holding the defaults,
// so that a package states its defaults once, as one struct literal, rather than as a ladder of
// "if zero, set" blocks.
package defaults

import (
	"fmt"
	"reflect"
)

// Zero sets every field of *dst that holds its zero value to the same field of def, for each field
// that def sets (is not zero in def). Fields def leaves zero are not touched. T must be a struct;
// def may set only exported fields.
func Zero[T any](dst *T, def T) { fill(dst, def, false) }

// NotPositive is Zero that also replaces a negative number: for options where a negative count or
// duration means "unset" rather than an error.
func NotPositive[T any](dst *T, def T) { fill(dst, def, true) }

func fill[T any](dst *T, def T, negative bool) {
	d := reflect.ValueOf(dst).Elem()
	v := reflect.ValueOf(def)
	if d.Kind() != reflect.Struct {
		panic(fmt.Sprintf("defaults: %s is not a struct", d.Type()))
	}
	for i := range v.NumField() {
		want := v.Field(i)
		if want.IsZero() {
			continue
		}
		field := d.Type().Field(i)
		if !field.IsExported() {
			panic(fmt.Sprintf("defaults: %s.%s is not exported", d.Type(), field.Name))
		}
		if got := d.Field(i); got.IsZero() || negative && isNegative(got) {
			got.Set(want)
		}
	}
}

func isNegative(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() < 0
	case reflect.Float32, reflect.Float64:
		return v.Float() < 0
	}
	return false
}
