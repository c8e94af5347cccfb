package main

import (
	"testing"

	"github.com/sandboxflow/sandboxflow/client"
)

func TestCancelArgs(t *testing.T) {
	for _, args := range [][]string{{"cancel"}, {"cancel", "a", "b"}, {"cancel", "a", "--nope"}} {
		if code, out := runStarter(t, "", args...); code != 2 || errorType(t, out) != client.TypeUsageError {
			t.Errorf("%v: exit %d, %s; want 2 and a UsageError", args, code, out)
		}
	}
	c, err := parseArgs([]string{"cancel", "sandbox-1", "--reason", "", "--by", "ops", "--wait"}, nil)
	if err != nil || c.id != "sandbox-1" || c.by != "ops" || !c.wait || c.reason != "" {
		t.Errorf("parse = %+v, %v; want sandbox-1 by ops, --wait, no reason", c, err)
	}
}
