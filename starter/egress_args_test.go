package main

import (
	"io"
	"slices"
	"testing"
)

func TestParseRunEgress(t *testing.T) {
	c, err := parseArgs([]string{"run", "--code", "print(1)", "--allow-host", "api.github.com", "--allow-host", "*.pypi.org:443", "--secret", "github"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"api.github.com", "*.pypi.org:443"}; !slices.Equal(c.req.Egress, want) {
		t.Errorf("egress: got %q; want %q", c.req.Egress, want)
	}
	if want := []string{"github"}; !slices.Equal(c.req.Secrets, want) {
		t.Errorf("secrets: got %q; want %q", c.req.Secrets, want)
	}
	if _, err := parseArgs([]string{"run", "--code", "x", "--allow-host", ""}, io.Discard); err == nil {
		t.Errorf("an empty --allow-host was accepted")
	}
}
