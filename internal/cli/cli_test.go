package cli

import (
	"errors"
	"flag"
	"io"
	"slices"
	"testing"
)

func newSet() (*flag.FlagSet, *string, *bool, *Pairs) {
	fs := NewFlagSet("test", io.Discard)
	s := fs.String("reason", "", "")
	b := fs.Bool("wait", false, "")
	p := &Pairs{Flag: "--env"}
	fs.Var(p, "env", "")
	return fs, s, b, p
}

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		min, max int
		wantPos  []string
		wantErr  bool
	}{
		{"flags only", []string{"--reason", "r", "--wait"}, 0, 0, nil, false},
		{"id first", []string{"ID", "--reason", "r"}, 1, 1, []string{"ID"}, false},
		{"id last", []string{"--reason", "r", "ID"}, 1, 1, []string{"ID"}, false},
		{"stray word between flags", []string{"--reason", "r", "oops", "--env", "A=1"}, 0, 0, nil, true},
		{"stray word after id", []string{"ID", "oops"}, 1, 1, nil, true},
		{"missing id", []string{"--wait"}, 1, 1, nil, true},
		{"after --", []string{"--wait", "--", "-ID"}, 1, 1, []string{"-ID"}, false},
		{"empty value", []string{"--reason", ""}, 0, 0, nil, true},
		{"empty value =", []string{"--reason="}, 0, 0, nil, true},
		{"unknown flag", []string{"--nope"}, 0, 0, nil, true},
		{"duplicate pair", []string{"--env", "A=1", "--env", "A=2"}, 0, 0, nil, true},
		{"two pairs", []string{"--env", "A=1", "--env", "B=2"}, 0, 0, nil, false},
		{"flag twice", []string{"--reason", "a", "--reason", "b"}, 0, 0, nil, true},
		{"bool twice", []string{"--wait", "--wait"}, 0, 0, nil, true},
		{"pair without =", []string{"--env", "A"}, 0, 0, nil, true},
		{"pair without name", []string{"--env", "=1"}, 0, 0, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, _, _, _ := newSet()
			pos, err := Parse(fs, tt.args, tt.min, tt.max)
			if tt.wantErr {
				var ue *UsageError
				if !errors.As(err, &ue) {
					t.Fatalf("Parse(%q) = %v; want a *UsageError", tt.args, err)
				}
				return
			}
			if err != nil || !slices.Equal(pos, tt.wantPos) {
				t.Fatalf("Parse(%q) = %q, %v; want %q", tt.args, pos, err, tt.wantPos)
			}
		})
	}
}

func TestParseMayBeEmpty(t *testing.T) {
	fs, s, _, p := newSet()
	if _, err := Parse(fs, []string{"--reason", "", "--env", "A="}, 0, 0, "reason"); err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if *s != "" || p.Map["A"] != "" || len(p.Map) != 1 {
		t.Fatalf("got reason %q env %v", *s, p.Map)
	}
	strict := &Pairs{Flag: "--input", NonEmptyValues: true}
	if err := strict.Set("a.txt="); err == nil {
		t.Fatal("Pairs with NonEmptyValues accepted an empty value")
	}
}

func TestList(t *testing.T) {
	if got, err := List("languages", "python, sh"); err != nil || !slices.Equal(got, []string{"python", "sh"}) {
		t.Fatalf("List = %q, %v", got, err)
	}
	for _, bad := range []string{"ruby,", ",python", "a,,b", "python,python", " "} {
		var ue *UsageError
		if _, err := List("languages", bad); !errors.As(err, &ue) {
			t.Errorf("List(%q) = %v; want a *UsageError", bad, err)
		}
	}
}

func TestParseHelp(t *testing.T) {
	fs, _, _, _ := newSet()
	if _, err := Parse(fs, []string{"-h"}, 0, 0); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("Parse(-h) = %v; want flag.ErrHelp", err)
	}
}
