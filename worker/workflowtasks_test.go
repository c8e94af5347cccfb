package main

import (
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/worker/service"
)

// Issue 33: the workflow worker's cache, task slots and pollers are flags with documented
// defaults; nonsense is refused at start.
func TestConfigWorkflowSizing(t *testing.T) {
	cfg, _, err := parseConfig("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c, tasks, p := cfg.WorkflowSizing(); c != service.DefaultWorkflowCache || tasks != service.DefaultWorkflowTasks || p != service.DefaultWorkflowPollers {
		t.Fatalf("default sizing = %d, %d, %d; want the documented defaults", c, tasks, p)
	}
	cfg, _, err = parseConfig("test", []string{"--workflow-cache", "20000", "--workflow-tasks", "64", "--workflow-pollers", "8"})
	if err != nil {
		t.Fatal(err)
	}
	if c, tasks, p := cfg.WorkflowSizing(); c != 20000 || tasks != 64 || p != 8 {
		t.Fatalf("sizing = %d, %d, %d; want 20000, 64, 8 from the flags", c, tasks, p)
	}
	for _, args := range [][]string{
		{"--workflow-cache", "-1"},
		{"--workflow-tasks", "1"},
		{"--workflow-pollers", "-2"},
		{"--workflow-tasks", "4", "--workflow-pollers", "5"},
	} {
		if _, _, err := parseConfig("test", args); guard.TypeOf(err) != guard.TypeConfigError {
			t.Errorf("parseConfig(%q) = %v; want a ConfigError", args, err)
		}
	}
}
