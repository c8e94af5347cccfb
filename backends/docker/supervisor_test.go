package docker

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// goFrameTypes reads protocol.go's frameType constants, by name (frameTunnelOpen) and value.
func goFrameTypes(t *testing.T) map[string]int {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "protocol.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "frameType" {
				continue
			}
			for i, name := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					t.Fatalf("protocol.go: %s is not a literal", name.Name)
				}
				v, err := strconv.Atoi(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				out[name.Name] = v
			}
		}
	}
	return out
}

// pyName is the supervisor's name of a Go frame type: frameTunnelOpen is F_TUNNEL_OPEN.
func pyName(goName string) string {
	var b strings.Builder
	b.WriteString("F")
	for _, r := range strings.TrimPrefix(goName, "frame") {
		if unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// The supervisor's frame numbers, header size and request version are what protocol.go says:
// each constant on one side has its twin on the other.
func TestSupervisorConstantsMatchProtocol(t *testing.T) {
	goTypes := goFrameTypes(t)
	if len(goTypes) < 11 {
		t.Fatalf("found %d frame types in protocol.go; want every one (at least 11)", len(goTypes))
	}
	py := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^(F_[A-Z_]+) = (\d+)$`).FindAllStringSubmatch(supervisorSource, -1) {
		v, _ := strconv.Atoi(m[2])
		py[m[1]] = v
	}
	for name, v := range goTypes {
		got, ok := py[pyName(name)]
		if !ok {
			t.Errorf("protocol.go's %s (%d) has no %s in supervisor.py", name, v, pyName(name))
		} else if got != v {
			t.Errorf("supervisor.py %s = %d; protocol.go %s = %d", pyName(name), got, name, v)
		}
		delete(py, pyName(name))
	}
	for name, v := range py {
		t.Errorf("supervisor.py's %s (%d) has no frame type in protocol.go", name, v)
	}
	if !strings.Contains(supervisorSource, "read_exact(0, "+strconv.Itoa(frameHeaderBytes)+")") {
		t.Errorf("supervisor.py does not read a %d-byte frame header", frameHeaderBytes)
	}
	if !strings.Contains(supervisorSource, `req.get("v") != `+strconv.Itoa(protocolVersion)+":") {
		t.Errorf("supervisor.py does not check for request version %d", protocolVersion)
	}
}

// supervisorDriver loads supervisor.py without running main() (its last line) and exercises its
// pure parts: "request" reads one request frame from stdin as the supervisor does and prints it
// as JSON; "parse" parses each stdin line, printing its JSON or ERR; "frames" writes frames and
// an exit report with the supervisor's own functions.
const supervisorDriver = `
import json, sys
path, mode = sys.argv[1], sys.argv[2]
src = open(path).read().rstrip()
if not src.endswith("\nmain()"):
    raise SystemExit("supervisor.py no longer ends with main()")
sup = {"__name__": "supervisor_under_test"}
exec(compile(src[: -len("main()")], path, "exec"), sup)
if mode == "request":
    print(json.dumps(sup["read_request"]()[1], sort_keys=True))
elif mode == "parse":
    for line in sys.stdin.read().split("\n"):
        if not line:
            continue
        try:
            print(json.dumps(sup["parse"](line), sort_keys=True))
        except (ValueError, IndexError) as e:
            print("ERR", type(e).__name__)
elif mode == "frames":
    sup["frame"](sup["F_STDOUT"], b"hello\n", 0)
    sup["frame"](sup["F_TUNNEL_DATA"], b"\x00\xffbytes", 7)
    sup["frame"](sup["F_EXIT"], sup["json_fields"]({"exit_code": 137, "signal": 9, "timed_out": False,
        "duration_ms": 1234, "stdout_bytes": 6, "stderr_bytes": 0, "pids_limit_hit": True, "oom_kills": 1, "limits_known": True}))
    sup["frame"](sup["F_END"], sup["json_fields"]({"files_truncated": True}))
`

// runSupervisorPart runs the driver in mode with stdin, under the flags the container uses.
func runSupervisorPart(t *testing.T, mode string, stdin []byte) []byte {
	t.Helper()
	need.Need(t, need.Python3)
	dir := t.TempDir()
	sup, drv := filepath.Join(dir, "supervisor.py"), filepath.Join(dir, "driver.py")
	if err := os.WriteFile(sup, []byte(supervisorSource), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(drv, []byte(supervisorDriver), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", "-I", "-S", drv, sup, mode)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("supervisor.py %s: %v\n%s", mode, err, stderr.Bytes())
	}
	return out
}

// The request frame the worker writes is what the supervisor reads, field for field, with files,
// env and the egress side included.
func TestSupervisorReadsTheWorkersRequest(t *testing.T) {
	c := testChecked("print('hé')\n")
	c.Files = []guard.InputFile{{Name: "in.txt", Content: []byte("line \"one\"\n\x00\xff")}, {Name: "empty", Content: nil}}
	c.Env = []guard.EnvVar{{Name: "WHO", Value: `a "quoted" \ value`}}
	eg := &sandboxEgress{port: 3128, env: map[string]string{"HTTP_PROXY": "http://127.0.0.1:3128"}, caPEM: []byte("-----BEGIN CERTIFICATE-----\n"),
		caFile: "/tmp/ca.pem", caBundle: "/tmp/bundle.pem"}
	frame, err := encodeRequest(c, 100123, eg)
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	if err := json.Unmarshal(frame[frameHeaderBytes:], &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(runSupervisorPart(t, "request", frame), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("supervisor.py read\n%v\nwant what the worker wrote\n%v", got, want)
	}
}

// The JSON subset parser takes what it must and refuses what the worker never writes, rather
// than misreading it.
func TestSupervisorParserSubset(t *testing.T) {
	lines := []string{
		`{"a":[1,-2,{"b":null}],"c":true,"d":false,"e":"x y","f":[],"g":{}}`,
		`"escaped \" quote"`,
		`{"a":1}trailing`,
		`{"a" 1}`,
		`[1 2]`,
		`{"a":`,
	}
	out := strings.Split(strings.TrimSpace(string(runSupervisorPart(t, "parse", []byte(strings.Join(lines, "\n"))))), "\n")
	want := []string{
		`{"a": [1, -2, {"b": null}], "c": true, "d": false, "e": "x y", "f": [], "g": {}}`,
		"ERR ValueError", "ERR ValueError", "ERR ValueError", "ERR ValueError", "ERR IndexError",
	}
	if len(out) != len(want) {
		t.Fatalf("parse printed %q; want %d lines", out, len(want))
	}
	for i := range want {
		if out[i] != want[i] {
			t.Errorf("parse(%s) = %s; want %s", lines[i], out[i], want[i])
		}
	}
}

// The frames the supervisor writes are the bytes encodeFrame makes, and its reports decode into
// the worker's types.
func TestSupervisorWritesFramesTheWorkerReads(t *testing.T) {
	got := runSupervisorPart(t, "frames", nil)
	var want []byte
	want = append(want, encodeFrame(frameStdout, 0, []byte("hello\n"))...)
	want = append(want, encodeFrame(frameTunnelData, 7, []byte("\x00\xffbytes"))...)
	if !bytes.HasPrefix(got, want) {
		t.Fatalf("frames: got %q; want them to start with %q", got, want)
	}
	rest := got[len(want):]
	var reports [][]byte
	for _, typ := range []frameType{frameExit, frameEnd} {
		if len(rest) < frameHeaderBytes || frameType(rest[4]) != typ {
			t.Fatalf("want a frame of type %d next; got %q", typ, rest)
		}
		n := int(rest[0])<<24 | int(rest[1])<<16 | int(rest[2])<<8 | int(rest[3])
		reports = append(reports, rest[frameHeaderBytes:frameHeaderBytes+n])
		rest = rest[frameHeaderBytes+n:]
	}
	var exit exitReport
	var end endReport
	if err := json.Unmarshal(reports[0], &exit); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(reports[1], &end); err != nil {
		t.Fatal(err)
	}
	wantExit := exitReport{ExitCode: 137, Signal: 9, DurationMS: 1234, StdoutBytes: 6, PidsLimitHit: true, OOMKills: 1, LimitsKnown: true}
	if exit != wantExit || !end.FilesTruncated || len(rest) != 0 {
		t.Errorf("exit %+v end %+v rest %q; want %+v, files_truncated, nothing more", exit, end, rest, wantExit)
	}
}
