package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	tclient "go.temporal.io/sdk/client"

	"github.com/sandboxflow/sandboxflow/guard"
)

func TestToolSchema(t *testing.T) {
	tests := []struct {
		format, backend string
		langs           []string
		wantLanguage    bool
		wantWarning     bool
		wantNote        string
	}{
		{FormatOpenAI, "docker", []string{"python"}, false, false, ""},
		{FormatAnthropic, "docker", []string{"python", "sh"}, true, false, ""},
		{FormatAnthropic, "local", nil, false, true, ""},
		{FormatOpenAI, "e2b", nil, false, false, "fresh E2B cloud sandbox"},
		{FormatOpenAI, "http", nil, false, false, "operator's own code-execution service"},
	}
	for _, tt := range tests {
		b, err := ToolSchema(tt.format, ToolOptions{Languages: tt.langs, Backend: tt.backend, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var tool map[string]any
		if err := json.Unmarshal(b, &tool); err != nil {
			t.Fatal(err)
		}
		def, params := tool, tool["input_schema"]
		if tt.format == FormatOpenAI {
			if tool["type"] != "function" {
				t.Fatalf("openai tool type %v; want function", tool["type"])
			}
			def = tool["function"].(map[string]any)
			params = def["parameters"]
		}
		if def["name"] != ToolName {
			t.Fatalf("name %v; want %s", def["name"], ToolName)
		}
		props := params.(map[string]any)["properties"].(map[string]any)
		if _, ok := props["code"]; !ok {
			t.Fatalf("%s: no code parameter: %s", tt.format, b)
		}
		if _, ok := props["language"]; ok != tt.wantLanguage {
			t.Fatalf("%s %v: language parameter present %t; want %t", tt.format, tt.langs, ok, tt.wantLanguage)
		}
		if _, ok := props["packages"]; !ok {
			t.Fatalf("%s: no packages parameter: %s", tt.format, b)
		}
		if _, ok := props["input_files"]; !ok || len(props) > 4 {
			t.Fatalf("the model may choose other than code, language, input files and packages: %v", props)
		}
		desc := def["description"].(string)
		if strings.Contains(desc, "nothing is isolated") != tt.wantWarning {
			t.Fatalf("backend %s: description %q; want the local warning %t", tt.backend, desc, tt.wantWarning)
		}
		if !strings.Contains(desc, tt.wantNote) {
			t.Fatalf("backend %s: description %q; want %q", tt.backend, desc, tt.wantNote)
		}
		if !strings.Contains(desc, "approves every run") || !strings.Contains(desc, "20s") {
			t.Fatalf("description does not say a person approves and the time limit: %q", desc)
		}
	}
	if _, err := ToolSchema("gemini", ToolOptions{}); err == nil {
		t.Fatalf("an unknown format was accepted")
	}
}

func TestToolArgumentsTakeOnlyCodeLanguageAndFiles(t *testing.T) {
	base := guard.Request{Settings: guard.Settings{Env: map[string]string{"K": "v"}, Limits: guard.Limits{Timeout: time.Second},
		Files: map[string][]byte{"conf.ini": []byte("x=1")}}}
	var args ToolArguments
	if err := json.Unmarshal([]byte(`{"code":"print(1)","language":"sh","network":true,"env":{"LD_PRELOAD":"x"},"input_files":{"data.csv":"a,b\n"}}`), &args); err != nil {
		t.Fatal(err)
	}
	req, err := args.Request(base)
	if err != nil || req.Code != "print(1)" || req.Language != "sh" || req.Network || req.Env["K"] != "v" || len(req.Env) != 1 || req.Limits.Timeout != time.Second ||
		len(req.Files) != 2 || string(req.Files["data.csv"]) != "a,b\n" || len(base.Files) != 1 {
		t.Fatalf("got %+v, %v; want the base request with only code, language and a file of its own from the model", req, err)
	}
	args.InputFiles = map[string]InputFile{"conf.ini": InputFile("x=2")}
	if _, err := args.Request(base); guard.TypeOf(err) != guard.TypeToolUsageError {
		t.Errorf("a model's file replacing the operator's: %v; want a ToolUsageError", err)
	}
}

// A model's packages go into the request as the lock text it gave (checked and shown to the
// reviewer like every request's); beside the operator's own packages they are refused.
func TestToolArgumentsPackages(t *testing.T) {
	lock := "numpy==2.1.0 --hash=sha256:" + strings.Repeat("a", 64) + "\n"
	raw, _ := json.Marshal(map[string]string{"code": "import numpy", "packages": lock})
	var args ToolArguments
	if err := json.Unmarshal(raw, &args); err != nil {
		t.Fatal(err)
	}
	req, err := args.Request(guard.Request{})
	if err != nil || req.Packages != lock {
		t.Fatalf("got packages %q, %v; want the model's lock", req.Packages, err)
	}
	operator := guard.Request{Settings: guard.Settings{Packages: "pandas==2 --hash=sha256:" + strings.Repeat("b", 64)}}
	if _, err := args.Request(operator); guard.TypeOf(err) != guard.TypeToolUsageError {
		t.Errorf("a model's lock beside the operator's: %v; want a ToolUsageError", err)
	}
	args.Packages = ""
	if req, err := args.Request(operator); err != nil || req.Packages != operator.Packages {
		t.Errorf("no lock from the model: %q, %v; want the operator's", req.Packages, err)
	}
}

func TestOutputs(t *testing.T) {
	r := guard.Result{OK: true, Stdout: []byte("hi\n"), Files: []guard.File{{Name: "a", Size: 1, Content: []byte("x")}}}
	if got := WithoutContents(r); len(got.Files) != 1 || got.Files[0].Content != nil || got.Files[0].Name != "a" || got.Files[0].Size != 1 {
		t.Errorf("WithoutContents: files %+v; want a's name and size only", got.Files)
	}
	if r.Files[0].Content == nil {
		t.Errorf("WithoutContents changed its argument's files")
	}
	e := NewErrorOutput(&guard.ApprovalDenied{Reason: guard.DeniedByReviewer, Reviewer: "bob", Message: "no"})
	if e.Error.Type != guard.TypeApprovalDenied || e.Error.Reviewer != "bob" || e.Error.Reason != "denied" {
		t.Errorf("got %+v", e)
	}
	ro := NewErrorOutput(fmt.Errorf("result: %w", &guard.ApprovalRefused{Reason: guard.RefusedAlreadyUsed, Msg: "used"}))
	if ro.Error.Type != guard.TypeApprovalRefused || ro.Error.Reason != "already_used" || ro.Error.Reviewer != "" {
		t.Errorf("got %+v; want type ApprovalRefused, reason already_used", ro)
	}
	if got := NewErrorOutput(errors.New("boom")).Error.Type; got != "Error" {
		t.Errorf("untyped error type %q; want Error", got)
	}
}

func TestConnectionFromEnv(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "temporal.example:7233")
	t.Setenv("TEMPORAL_NAMESPACE", "prod")
	t.Setenv("TEMPORAL_API_KEY", "key")
	opts, err := ConnectionFromEnv().Options()
	if err != nil {
		t.Fatal(err)
	}
	if opts.HostPort != "temporal.example:7233" || opts.Namespace != "prod" || opts.Credentials == nil || opts.ConnectionOptions.TLS == nil {
		t.Fatalf("got %+v; want address, namespace, API key credentials and TLS from the environment", opts)
	}
	def, err := Connection{}.Options()
	if err != nil {
		t.Fatal(err)
	}
	if def.HostPort != DefaultAddress || def.Namespace != DefaultNamespace || def.ConnectionOptions.TLS != nil {
		t.Fatalf("defaults: got %s %s TLS %v", def.HostPort, def.Namespace, def.ConnectionOptions.TLS)
	}
}

// Requests to a Temporal on this machine go uncompressed (gzip spends CPU on both ends and saves
// no bandwidth there; the server answers in the request's compression); to any other address,
// gzip as the SDK does; SANDBOXFLOW_TEMPORAL_COMPRESSION chooses either, and refuses a typo.
func TestConnectionCompression(t *testing.T) {
	for _, tc := range []struct {
		address, compression string
		wantGzip             bool
	}{
		{"", "", false},
		{"127.0.0.1:7233", "", false},
		{"127.8.9.10:7233", "auto", false},
		{"localhost:7233", "", false},
		{"[::1]:7233", "", false},
		{"temporal.example:7233", "", true},
		{"10.0.0.7:7233", "", true},
		{"[2001:db8::1]:7233", "", true},
		{"localhost.example:7233", "", true},
		{"127.0.0.1:7233", "gzip", true},
		{"temporal.example:7233", "none", false},
	} {
		t.Setenv("TEMPORAL_ADDRESS", tc.address)
		t.Setenv("SANDBOXFLOW_TEMPORAL_COMPRESSION", tc.compression)
		opts, err := ConnectionFromEnv().Options()
		if err != nil {
			t.Fatalf("%s %q: %v", tc.address, tc.compression, err)
		}
		_, gzip := opts.ConnectionOptions.GrpcCompression.(*tclient.GrpcCompressionGzip)
		_, none := opts.ConnectionOptions.GrpcCompression.(*tclient.GrpcCompressionNone)
		if gzip != tc.wantGzip || none == tc.wantGzip {
			t.Errorf("%s %q: compression %T; want gzip %v", tc.address, tc.compression, opts.ConnectionOptions.GrpcCompression, tc.wantGzip)
		}
	}
	if _, err := (Connection{Compression: "zstd"}).Options(); err == nil || !strings.Contains(err.Error(), "SANDBOXFLOW_TEMPORAL_COMPRESSION") {
		t.Errorf("compression zstd: %v; want a refusal naming the variable", err)
	}
}
