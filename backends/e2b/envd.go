package e2b

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/httpcall"
)

// envd speaks to the daemon inside one sandbox: its HTTP file API and its Connect services.
type envd struct {
	cfg   Config
	base  string
	id    string
	token string
}

func newEnvd(cfg Config, s sandbox) envd {
	domain := ""
	if s.Domain != nil {
		domain = *s.Domain
	}
	return envd{cfg: cfg, base: cfg.envdBase(s.SandboxID, domain), id: s.SandboxID, token: s.EnvdAccessToken}
}

// header sets what every envd request carries: the sandbox routing headers, the envd access
// token of a secure sandbox, and the user as HTTP basic auth with an empty password.
func (e envd) header(h http.Header) {
	h.Set("E2b-Sandbox-Id", e.id)
	h.Set("E2b-Sandbox-Port", strconv.Itoa(EnvdPort))
	if e.token != "" {
		h.Set("X-Access-Token", e.token)
	}
	h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(e.cfg.User+":")))
}

// upload writes one file (parents made) with envd's POST /files, multipart field "file".
func (e envd) upload(ctx context.Context, path string, content []byte) error {
	op := "e2b: envd upload"
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RequestTimeout)
	defer cancel()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	part, err := mw.CreateFormFile("file", path)
	if err == nil {
		_, err = part.Write(content)
	}
	if err == nil {
		err = mw.Close()
	}
	if err != nil {
		return &guard.IntegrationError{Op: op, Err: err}
	}
	q := url.Values{"path": {path}, "username": {e.cfg.User}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/files?"+q.Encode(), &body)
	if err != nil {
		return &guard.IntegrationError{Op: op, Err: err}
	}
	e.header(req.Header)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := e.cfg.HTTPClient.Do(req)
	if err != nil {
		return &guard.IntegrationError{Op: op, Err: err}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		return &guard.IntegrationError{Op: op, Err: fmt.Errorf("status %s", resp.Status)}
	}
	return nil
}

// entry is envd's filesystem.EntryInfo in its JSON form. Modified is its modifiedTime (a
// protobuf Timestamp: RFC 3339), empty from an envd that does not send it.
type entry struct {
	Name     string    `json:"name"`
	Type     enumJSON  `json:"type"`
	Path     string    `json:"path"`
	Size     int64JSON `json:"size"`
	Modified string    `json:"modifiedTime"`
}

// isFile reports a regular file (FILE_TYPE_FILE = 1); links and folders are not.
func (en entry) isFile() bool { return en.Type == "FILE_TYPE_FILE" || en.Type == "1" }

// unary makes a unary Connect call with the JSON codec, for example
// "filesystem.Filesystem/ListDir".
func (e envd) unary(ctx context.Context, method string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RequestTimeout)
	defer cancel()
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/"+method, bytes.NewReader(body))
	if err != nil {
		return err
	}
	e.header(req.Header)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("Connect-Timeout-Ms", strconv.FormatInt(e.cfg.RequestTimeout.Milliseconds(), 10))
	resp, err := e.cfg.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var ce connectError
		if json.Unmarshal(raw, &ce) == nil && ce.Code != "" {
			return fmt.Errorf("%s: %w", method, &ce)
		}
		return fmt.Errorf("%s: status %s", method, resp.Status)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: decode: %w", method, err)
	}
	return nil
}

// listDir lists path to depth with filesystem.Filesystem/ListDir.
func (e envd) listDir(ctx context.Context, path string, depth int) ([]entry, error) {
	var out struct {
		Entries []entry `json:"entries"`
	}
	err := e.unary(ctx, "filesystem.Filesystem/ListDir", map[string]any{"path": path, "depth": depth}, &out)
	return out.Entries, err
}

// makeDir makes a folder and its parents with filesystem.Filesystem/MakeDir; one that exists is
// fine.
func (e envd) makeDir(ctx context.Context, path string) error {
	var out struct{}
	err := e.unary(ctx, "filesystem.Filesystem/MakeDir", map[string]any{"path": path}, &out)
	var ce *connectError
	if errors.As(err, &ce) && ce.Code == "already_exists" {
		return nil
	}
	return err
}

// download reads a file with envd's GET /files, at most max+1 bytes (so a larger file shows).
func (e envd) download(ctx context.Context, path string, max int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RequestTimeout)
	defer cancel()
	q := url.Values{"path": {path}, "username": {e.cfg.User}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/files?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	e.header(req.Header)
	resp, err := e.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download %s: status %s", path, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, max+1))
}

// processConfig is envd's process.ProcessConfig.
type processConfig struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Envs map[string]string `json:"envs,omitempty"`
	Cwd  string            `json:"cwd,omitempty"`
}

// processEvent is envd's process.ProcessEvent inside a StartResponse ({"event": {...}}).
type processEvent struct {
	Event struct {
		Start *struct {
			Pid int64JSON `json:"pid"`
		} `json:"start,omitempty"`
		Data *struct {
			Stdout []byte `json:"stdout,omitempty"`
			Stderr []byte `json:"stderr,omitempty"`
		} `json:"data,omitempty"`
		End *struct {
			ExitCode int    `json:"exitCode"`
			Exited   bool   `json:"exited"`
			Status   string `json:"status"`
			Error    string `json:"error,omitempty"`
		} `json:"end,omitempty"`
		Keepalive *struct{} `json:"keepalive,omitempty"`
	} `json:"event"`
}

// procResult is what the process stream reported.
type procResult struct {
	stdout, stderr capped
	started        bool
	ended          bool
	exitCode       int
	exited         bool
	status         string
	// streamErr is the Connect error the stream ended with, if any.
	streamErr *connectError
}

// errNotSent marks a start that failed before its request was written in full, or that envd
// refused before any handler ran: the code cannot have started.
var errNotSent = errors.New("the start request did not reach envd")

// start calls process.Process/Start (server streaming) and reads its events until the end event
// or the end of the stream. timeout goes to envd as Connect-Timeout-Ms: envd kills the process
// when it passes. The returned error wraps errNotSent when the code cannot have started.
func (e envd) start(ctx context.Context, pc processConfig, timeout time.Duration, l guard.Limits) (procResult, error) {
	out := guard.OutputOf(ctx)
	res := procResult{stdout: capped{max: l.MaxStdoutBytes, out: out, stream: guard.StreamStdout},
		stderr: capped{max: l.MaxStderrBytes, out: out, stream: guard.StreamStderr}}
	end, err := e.stream(ctx, pc, timeout, false, res.event)
	res.streamErr = end
	return res, err
}

// stream calls process.Process/Start (server streaming) and hands each event to on until the
// end-of-stream message, whose error (if any) it returns. With stdin the process's stdin stays
// open for sendInput. timeout goes to envd as Connect-Timeout-Ms: envd kills the process when it
// passes. The returned error wraps errNotSent when the process cannot have started.
func (e envd) stream(ctx context.Context, pc processConfig, timeout time.Duration, stdin bool, on func(processEvent)) (*connectError, error) {
	msg, _ := json.Marshal(map[string]any{"process": pc, "stdin": stdin})
	var sent atomic.Bool
	req, err := http.NewRequestWithContext(httpcall.Trace(ctx, &sent), http.MethodPost,
		e.base+"/process.Process/Start", bytes.NewReader(envelope(0, msg)))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNotSent, err)
	}
	e.header(req.Header)
	req.Header.Set("Content-Type", contentTypeConnectJSON)
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("Connect-Timeout-Ms", strconv.FormatInt(timeout.Milliseconds(), 10))
	req.Header.Set("Keepalive-Ping-Interval", "50")
	resp, err := e.cfg.HTTPClient.Do(req)
	if err != nil {
		if !sent.Load() {
			return nil, fmt.Errorf("%w: %v", errNotSent, err)
		}
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		switch resp.StatusCode {
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
			http.StatusUnsupportedMediaType, http.StatusTooManyRequests:
			return nil, fmt.Errorf("%w: status %s", errNotSent, resp.Status)
		}
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	return readEvents(resp.Body, on)
}

// event takes one event of the process stream into res.
func (res *procResult) event(ev processEvent) {
	switch x := ev.Event; {
	case x.Start != nil:
		res.started = true
	case x.Data != nil:
		res.stdout.write(x.Data.Stdout)
		res.stderr.write(x.Data.Stderr)
	case x.End != nil:
		res.ended, res.exitCode, res.exited, res.status = true, x.End.ExitCode, x.End.Exited, x.End.Status
	}
}

// readEvents consumes an event stream, handing each event to on, up to the end-of-stream
// message, whose error it returns. A stream that breaks after an end event counts as complete.
func readEvents(body io.Reader, on func(processEvent)) (*connectError, error) {
	ended := false
	for {
		flags, msg, err := readEnvelope(body)
		switch {
		case err != nil && ended:
			return nil, nil // the end event came: output and exit code are complete
		case err == io.EOF:
			return nil, errors.New("the stream ended without an end-of-stream message")
		case err != nil:
			return nil, err
		}
		if flags&flagEndStream != 0 {
			var end endStream
			if err := json.Unmarshal(msg, &end); err != nil {
				return nil, fmt.Errorf("decode end of stream: %w", err)
			}
			return end.Error, nil
		}
		var ev processEvent
		if err := json.Unmarshal(msg, &ev); err != nil {
			return nil, fmt.Errorf("decode event: %w", err)
		}
		if ev.Event.End != nil {
			ended = true
		}
		on(ev)
	}
}

// sendInput writes data to the stdin of process pid (started with stdin) with
// process.Process/SendInput.
func (e envd) sendInput(ctx context.Context, pid int64, data []byte) error {
	var out struct{}
	return e.unary(ctx, "process.Process/SendInput",
		map[string]any{"process": map[string]any{"pid": pid}, "input": map[string]any{"stdin": data}}, &out)
}

// kill sends SIGKILL to process pid with process.Process/SendSignal.
func (e envd) kill(ctx context.Context, pid int64) error {
	var out struct{}
	return e.unary(ctx, "process.Process/SendSignal",
		map[string]any{"process": map[string]any{"pid": pid}, "signal": "SIGNAL_SIGKILL"}, &out)
}

// capped keeps the first max bytes written and counts the rest.
type capped struct {
	max       int64
	buf       []byte
	truncated bool
	// out, when set, gets each kept chunk as it is kept (guard.OutputFunc).
	out    guard.OutputFunc
	stream guard.Stream
	// all hashes every byte written, kept or not, and total counts them (measure).
	all   hash.Hash
	total int64
}

func (c *capped) write(p []byte) {
	if c.all == nil {
		c.all = sha256.New()
	}
	c.all.Write(p)
	c.total += int64(len(p))
	room := c.max - int64(len(c.buf))
	if int64(len(p)) > room {
		c.truncated = true
		p = p[:max(room, 0)]
	}
	c.buf = append(c.buf, p...)
	if c.out != nil && len(p) > 0 {
		c.out(c.stream, p)
	}
}

// measure returns the length and SHA-256 of every byte written, for the host's receipt.
func (c *capped) measure() *guard.StreamMeasure {
	if c.all == nil {
		c.all = sha256.New()
	}
	return &guard.StreamMeasure{Bytes: c.total, SHA256: hex.EncodeToString(c.all.Sum(nil))}
}
