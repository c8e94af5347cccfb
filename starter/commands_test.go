package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

// Every entry of the command table is documented, reachable and runnable in exactly one way.
func TestCommandTable(t *testing.T) {
	seen := map[string]bool{}
	text := usage()
	for _, c := range commands {
		if len(c.names) == 0 {
			t.Fatalf("an entry has no name: %+v", c)
		}
		for _, name := range c.names {
			if seen[name] {
				t.Errorf("command %q is in the table twice", name)
			}
			seen[name] = true
			if !strings.Contains(text, "\n  "+name+" ") {
				t.Errorf("the usage text has no line for %q", name)
			}
			if got := lookupCommand(name); got == nil || got.names[0] != c.names[0] {
				t.Errorf("lookupCommand(%q) = %v; want the entry of %q", name, got, c.names[0])
			}
		}
		if !strings.HasPrefix(c.help, "  "+c.names[0]+" ") || !strings.HasSuffix(c.help, "\n") {
			t.Errorf("%s: help %q does not start with its synopsis or end with a newline", c.names[0], c.help)
		}
		selfRun := c.main != nil
		parsed := c.parse != nil && (c.exec != nil) != (c.offline != nil)
		if selfRun == parsed || selfRun && (c.parse != nil || c.exec != nil || c.offline != nil || c.prepare != nil) {
			t.Errorf("%s: want either main alone, or parse with exactly one of exec and offline", c.names[0])
		}
		if c.server && !selfRun {
			t.Errorf("%s: a server reads its own command line (main)", c.names[0])
		}
	}
	if lookupCommand("nosuch") != nil {
		t.Error(`lookupCommand("nosuch") found an entry`)
	}
}

// The parser reads the table: every command it parses answers -h with the request for help.
func TestEveryParsedCommandTakesHelp(t *testing.T) {
	for _, c := range commands {
		if c.parse == nil {
			continue
		}
		for _, name := range c.names {
			args := []string{name, "-h"}
			if name == "session" {
				args = []string{name, "show", "-h"}
			}
			if _, err := parseArgs(args, io.Discard); !errors.Is(err, flag.ErrHelp) {
				t.Errorf("parseArgs(%q) = %v; want flag.ErrHelp", args, err)
			}
		}
	}
}

// A usage error prints the error and one line of help on stderr, not the whole usage text; -h
// prints the whole usage text.
func TestUsageErrorIsShort(t *testing.T) {
	for _, args := range [][]string{{"approve", "x", "--key", "k"}, {"run"}, {"approve", "x", "--bogus"}, {"bogus"}} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, strings.NewReader(""), &out, &errb); code != 2 {
			t.Errorf("%q: exit %d; want 2", args, code)
		}
		lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[1], "usage: starter ") || !strings.Contains(lines[1], " -h ") {
			t.Errorf("%q: stderr %q; want the error and one usage line", args, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"approve", "-h"}, strings.NewReader(""), &out, &errb); code != 0 || out.String() != usage() {
		t.Errorf("approve -h: exit %d, stdout %d bytes; want 0 and the usage text", code, out.Len())
	}
}
