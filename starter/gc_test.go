package main

import (
	"runtime/debug"
	"testing"
)

// A command collects at GOGC=400 unless the user set GOGC or GOMEMLIMIT.
func TestShortLivedGC(t *testing.T) {
	for _, tc := range []struct {
		env, value string
		want       int
	}{{"", "", 400}, {"GOGC", "150", 100}, {"GOMEMLIMIT", "1GiB", 100}} {
		t.Setenv("GOGC", "")
		t.Setenv("GOMEMLIMIT", "")
		if tc.env != "" {
			t.Setenv(tc.env, tc.value)
		}
		before := debug.SetGCPercent(100)
		shortLivedGC()
		if got := debug.SetGCPercent(before); got != tc.want {
			t.Errorf("%s=%q: GC percent %d; want %d", tc.env, tc.value, got, tc.want)
		}
	}
}
