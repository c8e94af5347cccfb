package docker

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/sandboxflow/sandboxflow/guard"
)

// bootstrapSource is the program the container runs: `python3 -I -S -c <bootstrapSource>`. It is
// ours, never the model's: the code arrives on stdin.
//
//go:embed bootstrap.py
var bootstrapSource string

// bootstrapCmd is the container's whole command line.
func bootstrapCmd() []string {
	return []string{"python3", "-I", "-S", "-c", bootstrapSource}
}

// protocolVersion is the version of the stdin document and of the result line.
const protocolVersion = 1

// bootRequest is the document the worker writes on the container's stdin. Every string the
// bootstrap decodes is base64 ([]byte) or a plain word, so that it can be parsed without Python's
// json module, which minimal images lack.
type bootRequest struct {
	V                 int        `json:"v"`
	Language          string     `json:"language"`
	Code              []byte     `json:"code"`
	Files             []bootPair `json:"files"`
	Env               []bootPair `json:"env"`
	TimeoutMS         int64      `json:"timeout_ms"`
	MaxStdoutBytes    int64      `json:"max_stdout_bytes"`
	MaxStderrBytes    int64      `json:"max_stderr_bytes"`
	MaxFiles          int        `json:"max_files"`
	MaxFileBytes      int64      `json:"max_file_bytes"`
	MaxTotalFileBytes int64      `json:"max_total_file_bytes"`
}

type bootPair struct {
	Name  []byte `json:"name"`
	Value []byte `json:"value,omitempty"`
	// Content is used for files, Value for env.
	Content []byte `json:"content,omitempty"`
}

// encodeRequest returns the stdin document for c.
func encodeRequest(c guard.Checked) ([]byte, error) {
	if c.Language != guard.Python && c.Language != guard.Shell {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("docker backend: language %q is not offered (offered: %s, %s)", c.Language, guard.Python, guard.Shell)}
	}
	req := bootRequest{
		V:                 protocolVersion,
		Language:          c.Language,
		Code:              []byte(c.Code),
		Files:             []bootPair{},
		Env:               []bootPair{},
		TimeoutMS:         c.Limits.Timeout.Milliseconds(),
		MaxStdoutBytes:    c.Limits.MaxStdoutBytes,
		MaxStderrBytes:    c.Limits.MaxStderrBytes,
		MaxFiles:          c.Limits.MaxFiles,
		MaxFileBytes:      c.Limits.MaxFileBytes,
		MaxTotalFileBytes: c.Limits.MaxTotalFileBytes,
	}
	if req.TimeoutMS <= 0 {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("docker backend: timeout %s is not positive", c.Limits.Timeout)}
	}
	for _, f := range c.Files {
		if err := guard.CheckFileName(f.Name); err != nil {
			return nil, err
		}
		req.Files = append(req.Files, bootPair{Name: []byte(f.Name), Content: f.Content})
	}
	for _, e := range c.Env {
		req.Env = append(req.Env, bootPair{Name: []byte(e.Name), Value: []byte(e.Value)})
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("docker: encode request: %w", err)
	}
	return b, nil
}

// bootResult is the line the bootstrap prints. The code runs as the same user as the bootstrap and
// could have written it, so nothing in it is trusted: sizes are recomputed and limits re-applied.
type bootResult struct {
	V               int        `json:"v"`
	Error           []byte     `json:"error"`
	ExitCode        *int       `json:"exit_code"`
	Signal          int        `json:"signal"`
	TimedOut        bool       `json:"timed_out"`
	DurationMS      int64      `json:"duration_ms"`
	Stdout          []byte     `json:"stdout"`
	Stderr          []byte     `json:"stderr"`
	StdoutTruncated bool       `json:"stdout_truncated"`
	StderrTruncated bool       `json:"stderr_truncated"`
	Files           []bootPair `json:"files"`
	FilesTruncated  bool       `json:"files_truncated"`
	PidsLimitHit    bool       `json:"pids_limit_hit"`
	OOMKills        int        `json:"oom_kills"`
	// LimitsKnown says the bootstrap could read the pids and memory cgroup counters (under runc;
	// gVisor has no cgroup files), so PidsLimitHit and OOMKills are complete without asking the
	// daemon.
	LimitsKnown bool `json:"limits_known"`
}

// maxResultBytes bounds the result line the worker reads for limits l: every byte the caps let
// through, base64-encoded, plus room for names and field names. More than this is an
// IntegrationError, and reading stops there.
func maxResultBytes(l guard.Limits) int64 {
	b64 := func(n int64) int64 { return (n+2)/3*4 + 4 }
	const overhead, perFile = 64 << 10, 4 << 10
	return overhead + b64(l.MaxStdoutBytes) + b64(l.MaxStderrBytes) + b64(l.MaxTotalFileBytes) +
		int64(l.MaxFiles)*perFile
}

var errResultTooLarge = errors.New("sandbox output is over the result bound")

// boundedBuffer keeps what is written until max bytes; a write past max fails with
// errResultTooLarge and keeps nothing more.
type boundedBuffer struct {
	buf []byte
	max int64
}

func (w *boundedBuffer) Write(p []byte) (int, error) {
	if int64(len(w.buf))+int64(len(p)) > w.max {
		return 0, errResultTooLarge
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// decodeResult parses the bootstrap's line. It fails for anything but exactly one JSON object of
// protocol version 1 (white space around it allowed).
func decodeResult(line []byte) (bootResult, error) {
	var r bootResult
	if err := json.Unmarshal(line, &r); err != nil {
		return bootResult{}, fmt.Errorf("sandbox result is not readable JSON: %w", err)
	}
	if r.V != protocolVersion {
		return bootResult{}, fmt.Errorf("sandbox result has version %d, want %d", r.V, protocolVersion)
	}
	if len(r.Error) == 0 && r.ExitCode == nil {
		return bootResult{}, errors.New("sandbox result has neither an exit code nor an error")
	}
	return r, nil
}

// toResult turns a bootstrap result into a guard.Result with every limit applied. Produced files
// whose names are not valid UTF-8 are dropped (setting FilesTruncated); guard.Enforce drops the
// rest of the unsafe, colliding and oversized ones.
func (r bootResult) toResult(l guard.Limits) guard.Result {
	res := guard.Result{
		ExitCode:        *r.ExitCode,
		TimedOut:        r.TimedOut,
		Stdout:          r.Stdout,
		Stderr:          r.Stderr,
		StdoutTruncated: r.StdoutTruncated,
		StderrTruncated: r.StderrTruncated,
		FilesTruncated:  r.FilesTruncated,
	}
	for _, f := range r.Files {
		if !utf8.Valid(f.Name) {
			res.FilesTruncated = true
			continue
		}
		res.Files = append(res.Files, guard.File{Name: string(f.Name), Size: int64(len(f.Content)), Content: f.Content})
	}
	return guard.Enforce(res, l)
}

// withNote appends note to stderr, cutting stderr first so that the note survives the cap.
func withNote(res guard.Result, note string, maxStderr int64) guard.Result {
	room := maxStderr - int64(len(note))
	if room < 0 {
		room = 0
	}
	if int64(len(res.Stderr)) > room {
		res.Stderr = res.Stderr[:room:room]
		res.StderrTruncated = true
	}
	res.Stderr = append(append([]byte(nil), res.Stderr...), note...)
	return res
}
