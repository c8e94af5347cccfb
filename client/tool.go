package client

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/kinds"
	"github.com/sandboxflow/sandboxflow/guard"
)

// ToolName is the name of the tool a model calls.
const ToolName = "run_code"

// Tool formats.
const (
	FormatOpenAI    = "openai"
	FormatAnthropic = "anthropic"
)

// ToolOptions describe what the operator offers; the model chooses only the code, where more than
// one is offered the language, and input files of its own beside the operator's. Limits, network
// and env stay the operator's.
type ToolOptions struct {
	// Languages offered. Optional: defaults to ["python"].
	Languages []string
	// Timeout is the run's time limit, told to the model. Optional: defaults to guard's default.
	Timeout time.Duration
	// Backend is the backend that runs the code; the description adds what kinds.ModelNote says
	// of it (for local that nothing is isolated, for e2b and http where the code runs). Optional.
	Backend string
	// LocalWarning is the text used for the local backend. Optional: a built-in warning.
	LocalWarning string
}

// ToolArguments are what a model sends when it calls the tool.
type ToolArguments struct {
	Code     string `json:"code"`
	Language string `json:"language,omitempty"`
	// InputFiles are written into the run's working folder before it starts, by name; the
	// operator's input files are kept and cannot be replaced (WithInputFiles).
	InputFiles map[string]InputFile `json:"input_files,omitempty"`
	// Packages is a lock (guard.Settings.Packages) the model asks for, reviewed with the code;
	// refused beside the operator's own (WithPackages).
	Packages string `json:"packages,omitempty"`
}

// ToolSchema returns the run_code tool definition in the format of OpenAI's or Anthropic's
// function calling.
func ToolSchema(format string, opts ToolOptions) ([]byte, error) {
	langs := opts.Languages
	if len(langs) == 0 {
		langs = []string{guard.Python}
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = guard.DefaultTimeout
	}
	desc := fmt.Sprintf("Run %s code in a sandbox and get back its exit code, stdout, stderr and the files it wrote in its working folder. "+
		"A person reviews and approves every run before it starts, so it may take a while; a denial comes back as an error. "+
		"The run is stopped after %s (a timeout is reported, not an error, so you can try again with faster code). "+
		"Output is cut to a limit; there is no network unless the operator allows it.",
		strings.Join(langs, " or "), timeout)
	if opts.Backend == kinds.Local && opts.LocalWarning != "" {
		desc += " WARNING: " + opts.LocalWarning
	} else if note := kinds.ModelNote(opts.Backend); note != "" {
		desc += " " + note
	}
	props := map[string]any{
		"code":        map[string]any{"type": "string", "description": "The complete program to run."},
		"input_files": InputFilesSchema(),
		"packages":    PackagesSchema("the program"),
	}
	required := []string{"code"}
	if len(langs) > 1 {
		props["language"] = map[string]any{"type": "string", "enum": langs, "description": "The program's language."}
		required = append(required, "language")
	}
	params := map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             required,
		"additionalProperties": false,
	}
	var tool any
	switch format {
	case FormatOpenAI:
		tool = map[string]any{"type": "function", "function": map[string]any{
			"name": ToolName, "description": desc, "parameters": params,
		}}
	case FormatAnthropic:
		tool = map[string]any{"name": ToolName, "description": desc, "input_schema": params}
	default:
		return nil, fmt.Errorf("client: tool format %q is not %q or %q", format, FormatOpenAI, FormatAnthropic)
	}
	return json.MarshalIndent(tool, "", "  ")
}

// Request turns a model's tool call into a request: code, language, input files and packages of its own come
// from the model; everything else is the operator's base request. A file named like one of the
// operator's is a ToolUsageError.
func (a ToolArguments) Request(base guard.Request) (guard.Request, error) {
	base.Code = a.Code
	if a.Language != "" {
		base.Language = a.Language
	}
	files, err := WithInputFiles(base.Files, a.InputFiles)
	if err != nil {
		return guard.Request{}, err
	}
	base.Files = files
	if base.Packages, err = WithPackages(base.Packages, a.Packages); err != nil {
		return guard.Request{}, err
	}
	return base, nil
}
