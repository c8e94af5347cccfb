package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/internal/cli"
)

// Finding 5 of issue 17: stray words were ignored, duplicate names kept the last value, empty
// values and an empty language passed.
func TestParseArgsRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--code", "print(1)", "oops", "--env", "PATH=/x"},
		{"run", "--code", "print(1)", "--env", "A=1", "--env", "A=2"},
		{"run", "--code", "print(1)", "--input", "a.txt=x", "--input", "a.txt=y"},
		{"run", "--code", "print(1)", "--input", "a.txt="},
		{"run", "--code", "print(1)", "--env", "=1"},
		{"run", "--code", "print(1)", "--workflow-id", ""},
		{"run", "--code", "print(1)", "--task-queue", ""},
		{"run", "--code", "print(1)", "--file", "x.py"},
		{"run", "--code", "print(1)", "--code", "print(2)"},
		{"run", "--code", "print(1)", "--timeout", "1s", "--timeout", "2s"},
		{"run"},
		{"pending", "extra"},
		{"pending", "--page-size", "0"},
		{"pending", "--page-size", "1001"},
		{"show"},
		{"show", "ID", "other"},
		{"show", "ID", "--env-values", "other"},
		{"result", "ID", "--timeout", "-1s"},
		{"watch"},
		{"watch", "ID", "--cell", "-1"},
		{"watch", "ID", "--follow"},
		{"result", "ID", "--cell", "2"},
		{"approve", "ID", "--digest", "d"},
		{"approve", "ID", "--key", "k"},
		{"approve", "ID", "--key", "k", "--digest", ""},
		{"approve", "ID", "--reviewer", "bob", "--digest", "d"},
		{"deny", "ID", "--key", "k"},
		{"deny", "ID", "--key", "k", "--reason", "r", "stray"},
		{"statement", "ID", "--expires-in", "-1s"},
		{"tool-schema", "--languages", "ruby,"},
		{"tool-schema", "--languages", "python,,sh"},
		{"tool-schema", "--languages", "ruby"},
		{"tool-schema", "--languages", ""},
		{"tool-schema", "--format", "xml"},
		{"tool-schema", "oops"},
		{"nosuch"},
		{},
	} {
		_, err := parseArgs(args, io.Discard)
		var ue *cli.UsageError
		if !errors.As(err, &ue) {
			t.Errorf("parseArgs(%q) = %v; want a *cli.UsageError", args, err)
		}
	}
}

func TestParseArgsAccepts(t *testing.T) {
	cmd, err := parseArgs([]string{"run", "--code", "print(1)", "--env", "A=1", "--env", "B=", "--input", "a.txt=/p", "--wait"}, io.Discard)
	if err != nil {
		t.Fatalf("parseArgs: %v", err)
	}
	if cmd.req.Env["A"] != "1" || cmd.req.Env["B"] != "" || len(cmd.req.Env) != 2 || cmd.inputs.Map["a.txt"] != "/p" || !cmd.wait {
		t.Fatalf("parsed %+v", cmd)
	}
	for _, args := range [][]string{
		{"show", "ID", "--env-values"},
		{"show", "--env-values", "ID"},
		{"result", "ID", "--timeout", "2s"},
		{"result", "ID", "--follow"},
		{"watch", "ID", "--cell", "2", "--timeout", "1m"},
		{"approve", "--digest", "d", "ID", "--key", "k"},
		{"deny", "ID", "--key", "k", "--reason", "r"},
		{"statement", "ID", "--deny"},
		{"tool-schema", "--languages", "python,sh", "--format", "anthropic"},
	} {
		cmd, err := parseArgs(args, io.Discard)
		if err != nil {
			t.Errorf("parseArgs(%q) = %v", args, err)
			continue
		}
		if args[0] != "tool-schema" && cmd.id != "ID" {
			t.Errorf("parseArgs(%q): id %q; want ID", args, cmd.id)
		}
	}
	if _, err := parseArgs([]string{"show", "-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("show -h = %v; want flag.ErrHelp", err)
	}
}

// runStarter runs a command line in-process and returns its exit code and stdout.
func runStarter(t *testing.T, stdin string, args ...string) (int, string) {
	t.Helper()
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1") // nothing listens: no command here may dial
	var out bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, io.Discard)
	return code, out.String()
}

// errorType decodes {"error": {"type": ...}} from a command's stdout.
func errorType(t *testing.T, out string) string {
	t.Helper()
	var e client.ErrorOutput
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatalf("stdout %q is not one JSON document: %v", out, err)
	}
	return e.Error.Type
}

func TestRunExitCodesAndJSON(t *testing.T) {
	code, out := runStarter(t, "", "run", "--code", "print(1)", "oops")
	if code != 2 || errorType(t, out) != client.TypeUsageError {
		t.Errorf("stray word: exit %d, %s; want 2 and a UsageError", code, out)
	}
	code, out = runStarter(t, "", "tool-schema", "--languages", "ruby,")
	if code != 2 || errorType(t, out) != client.TypeUsageError {
		t.Errorf("tool-schema --languages ruby,: exit %d, %s; want 2 and a UsageError", code, out)
	}
	code, out = runStarter(t, "", "tool-schema", "--languages", "python,sh")
	if code != 0 || !strings.Contains(out, `"sh"`) {
		t.Errorf("tool-schema: exit %d, %s", code, out)
	}
}

// Finding 2 of issue 17: `printf '\xff\xfe' | starter run --file -` ran U+FFFD; now it is a
// ToolUsageError, before any connection.
func TestRunRefusesInvalidUTF8(t *testing.T) {
	code, out := runStarter(t, "\xff\xfe", "run", "--file", "-")
	if code != 1 || errorType(t, out) != "ToolUsageError" || !strings.Contains(out, "UTF-8") {
		t.Errorf("code from stdin: exit %d, %s; want 1 and a ToolUsageError about UTF-8", code, out)
	}
	code, out = runStarter(t, "", "run", "--code", "print(1)", "--env", "A=\xff")
	if code != 1 || errorType(t, out) != "ToolUsageError" {
		t.Errorf("env value: exit %d, %s; want 1 and a ToolUsageError", code, out)
	}
	in := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(in, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out = runStarter(t, "", "run", "--code", "print(1)", "--input", "na\xffme.txt="+in)
	if code != 1 || errorType(t, out) != "ToolUsageError" {
		t.Errorf("input name: exit %d, %s; want 1 and a ToolUsageError", code, out)
	}
}

// Finding 4 of issue 17: a request over Temporal's limits was a raw gRPC error with nothing on
// stdout; now it is a ToolUsageError in JSON that names the limit.
func TestRunRefusesOversizedInput(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.bin")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := runStarter(t, "", "run", "--code", "print(1)", "--input", "big.bin="+big)
	if code != 1 || errorType(t, out) != "ToolUsageError" || !strings.Contains(out, "2097152") {
		t.Errorf("3 MiB input: exit %d, %s; want 1 and a ToolUsageError naming 2097152", code, out)
	}
	code, out = runStarter(t, strings.Repeat("#", 5<<20), "run", "--file", "-")
	if code != 1 || errorType(t, out) != "ToolUsageError" {
		t.Errorf("5 MiB code: exit %d, %.200s; want 1 and a ToolUsageError", code, out)
	}
}

// FuzzParseArgs feeds arbitrary command lines to the parser: no panic, and every refusal is a
// usage error (or the request for help).
func FuzzParseArgs(f *testing.F) {
	f.Add("run\x00--code\x00print(1)\x00oops")
	f.Add("run\x00--env\x00A=1\x00--env\x00A=2")
	f.Add("show\x00ID\x00--env-values")
	f.Add("approve\x00ID\x00--digest\x00d\x00--reviewer\x00b")
	f.Add("tool-schema\x00--languages\x00ruby,")
	f.Add("result\x00--\x00-x\x00--timeout\x001s")
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\x00")
		cmd, err := parseArgs(args, io.Discard)
		var ue *cli.UsageError
		switch {
		case err == nil:
			if cmd == nil {
				t.Fatalf("parseArgs(%q) returned no command and no error", args)
			}
		case errors.Is(err, flag.ErrHelp), errors.As(err, &ue):
		default:
			t.Fatalf("parseArgs(%q) = %T %v; want a *cli.UsageError", args, err, err)
		}
	})
}
