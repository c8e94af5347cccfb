package docker

import (
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/sandboxflow/sandboxflow/egress"
	"github.com/sandboxflow/sandboxflow/guard"
)

// supervisorSource is the program the container runs as its PID 1:
// `python3 -I -S -c <supervisorSource>`. It is ours, never the model's: the code arrives on stdin.
//
//go:embed supervisor.py
var supervisorSource string

// supervisorCmd is the container's whole command line.
func supervisorCmd() []string {
	return []string{"python3", "-I", "-S", "-c", supervisorSource}
}

// protocolVersion is the version of the request document.
const protocolVersion = 2

// frameType says what a frame carries. Worker and supervisor exchange frames on the container's
// stdin and stdout: a 4-byte big-endian payload length, the type byte, a 4-byte big-endian
// channel and the payload. Channel 0 is the run itself; other channels are reserved for
// multiplexed streams such as the egress tunnel (see doc.go).
type frameType byte

// Frame types of a run, on channel 0. Keep them, and the tunnel's below, in step with
// supervisor.py.
const (
	// frameRequest (worker → supervisor, channel 0): the JSON request document. The supervisor
	// runs nothing before it has read this whole frame.
	frameRequest frameType = 1
	// frameStdout and frameStderr (supervisor → worker, channel 0): bytes the code wrote, as they
	// come, at most the caps in all.
	frameStdout frameType = 3
	frameStderr frameType = 4
	// frameFile (supervisor → worker): one produced file: a 2-byte name length, the name, the
	// content.
	frameFile frameType = 5
	// frameExit (supervisor → worker): how the code ended, as JSON (exitReport).
	frameExit frameType = 6
	// frameEnd (supervisor → worker): the last frame, as JSON (endReport).
	frameEnd frameType = 7
	// frameError (supervisor → worker): the supervisor failed; the payload says why.
	frameError frameType = 8
	// frameConfigError (supervisor → worker): the image cannot host the supervisor (for example
	// a python3 without ctypes); a guard.ConfigError.
	frameConfigError frameType = 9
)

// Frame types of a session (issue 28, session.go), on channel 0: the session request instead of
// a run's, then one cell frame per cell, each answered by stdout, stderr, exit and file frames
// as a run's and an end-of-cell frame; the supervisor then waits for the next cell. When the
// worker ends stdin the supervisor ends with frameEnd.
const (
	// frameSession (worker → supervisor): the session request document (supSession): input
	// files, env, uid. Nothing of any cell is in it.
	frameSession frameType = 10
	// frameCell (worker → supervisor): one cell (supCell): its index, language, code, timeout
	// and caps. The supervisor runs nothing of it before it has read the whole frame.
	frameCell frameType = 11
	// frameCellEnd (supervisor → worker): the last frame of a cell, as JSON (endReport, with the
	// cell's index and the session's nonce) and a newline.
	frameCellEnd frameType = 12
	// frameReady (supervisor → worker): the session's input files are written; cells may come.
	// Its payload is JSON (endReport, with the session's nonce) and a newline.
	frameReady frameType = 13
)

// frameOutput (supervisor → worker, runs and cells): one thing the code showed (guard.Output): a
// 2-byte length, a JSON header (outputHeader), then the data. They come after the exit frame.
const frameOutput frameType = 14

// outputHeader is the JSON header of frameOutput.
type outputHeader struct {
	Index   int    `json:"index"`
	Source  string `json:"source"`
	MIME    string `json:"mime"`
	Size    int64  `json:"size"`
	LeftOut bool   `json:"left_out"`
}

// Frame types of the egress tunnel: a connection the supervisor accepted inside the container
// (channel = connection id, payload = the listening port), its bytes in either direction, and its
// end (either side). They flow only in runs whose request carries egress (egress.go); in any
// other run a frame on a channel other than 0 fails the run.
const (
	frameTunnelOpen  frameType = 16
	frameTunnelData  frameType = 17
	frameTunnelClose frameType = 18
)

const frameHeaderBytes = 9

// encodeFrame returns one frame.
func encodeFrame(t frameType, channel uint32, payload []byte) []byte {
	b := make([]byte, frameHeaderBytes, frameHeaderBytes+len(payload))
	binary.BigEndian.PutUint32(b[0:4], uint32(len(payload)))
	b[4] = byte(t)
	binary.BigEndian.PutUint32(b[5:9], channel)
	return append(b, payload...)
}

// supRequest is the request document. Every string the supervisor decodes is base64 ([]byte) or
// a plain word, so that it can be parsed without Python's json module.
type supRequest struct {
	V         int    `json:"v"`          // protocolVersion; the supervisor refuses another
	Language  string `json:"language"`   // guard.Python or guard.Shell
	Code      []byte `json:"code"`       // the program text
	TimeoutMS int64  `json:"timeout_ms"` // the supervisor's own deadline for the code
	// NoCapture runs the code's Python without the capture (python3 -), as before outputs
	// existed: set only by BenchmarkOutputs, for its reference.
	NoCapture bool `json:"no_capture,omitempty"`
	supSetup
	supCaps
}

// supSetup is what a run's request and a session's share (the fields are flattened into each
// document): the sandbox's files, environment, uid and side of egress.
type supSetup struct {
	Files []supPair `json:"files"` // input files (Name, Content), written to /work
	Env   []supPair `json:"env"`   // the code's environment (Name, Value)
	UID   int       `json:"uid"`   // the uid the code runs as (the supervisor switches to it under runsc)

	// The sandbox's side of egress (egress.go); all empty without egress.
	EgressPort         int      `json:"egress_port,omitempty"`          // where the supervisor listens on 127.0.0.1, relaying each connection as tunnel frames
	EgressCA           []byte   `json:"egress_ca,omitempty"`            // the egress CA's certificate (PEM), written for the code's TLS clients
	EgressCAFile       []byte   `json:"egress_ca_file,omitempty"`       // the path the CA alone is written to (NODE_EXTRA_CA_CERTS names it)
	EgressCABundle     []byte   `json:"egress_ca_bundle,omitempty"`     // the path the image's roots then the CA are written to (SSL_CERT_FILE and its kin)
	EgressImageBundles [][]byte `json:"egress_image_bundles,omitempty"` // the image's root bundles to look for, in order; the first that exists is used
}

// supCaps are the caps of guard.Limits that the supervisor applies while reading the code's
// output, for a run and for each cell.
type supCaps struct {
	MaxStdoutBytes    int64 `json:"max_stdout_bytes"`
	MaxStderrBytes    int64 `json:"max_stderr_bytes"`
	MaxFiles          int   `json:"max_files"`
	MaxFileBytes      int64 `json:"max_file_bytes"`
	MaxTotalFileBytes int64 `json:"max_total_file_bytes"`
	// The output caps (guard.Limits.MaxOutputs...): outputs past them are dropped or left out.
	MaxOutputs          int   `json:"max_outputs"`
	MaxOutputBytes      int64 `json:"max_output_bytes"`
	MaxTotalOutputBytes int64 `json:"max_total_output_bytes"`
}

func capsOf(l guard.Limits) supCaps {
	return supCaps{MaxStdoutBytes: l.MaxStdoutBytes, MaxStderrBytes: l.MaxStderrBytes,
		MaxFiles: l.MaxFiles, MaxFileBytes: l.MaxFileBytes, MaxTotalFileBytes: l.MaxTotalFileBytes,
		MaxOutputs: l.MaxOutputs, MaxOutputBytes: l.MaxOutputBytes, MaxTotalOutputBytes: l.MaxTotalOutputBytes}
}

// setupOf returns the setup of a sandbox with files and env, run as uid, with the sandbox's side
// of eg (nil without egress); a file name the supervisor could not write safely is refused.
func setupOf(files []guard.InputFile, env []guard.EnvVar, uid int, eg *sandboxEgress) (supSetup, error) {
	s := supSetup{Files: []supPair{}, Env: []supPair{}, UID: uid}
	for _, f := range files {
		if err := guard.CheckFileName(f.Name); err != nil {
			return supSetup{}, err
		}
		s.Files = append(s.Files, supPair{Name: []byte(f.Name), Content: f.Content})
	}
	for _, e := range env {
		s.Env = append(s.Env, supPair{Name: []byte(e.Name), Value: []byte(e.Value)})
	}
	if eg != nil {
		// After the request's own variables, so that the proxy's win.
		s.Env = append(s.Env, envPairs(eg.env)...)
		s.EgressPort = int(eg.port)
		if len(eg.caPEM) > 0 {
			s.EgressCA, s.EgressCAFile, s.EgressCABundle = eg.caPEM, []byte(eg.caFile), []byte(eg.caBundle)
			for _, f := range egress.ImageCABundles() {
				s.EgressImageBundles = append(s.EgressImageBundles, []byte(f))
			}
		}
	}
	return s, nil
}

type supPair struct {
	Name  []byte `json:"name"`
	Value []byte `json:"value,omitempty"`
	// Content is used for files, Value for env.
	Content []byte `json:"content,omitempty"`
}

// encodeRequest returns the request frame for c, run as uid, with the sandbox's side of its
// egress (nil when it has none).
func encodeRequest(c guard.Checked, uid int, eg *sandboxEgress) ([]byte, error) {
	return encodeRun(c, uid, eg, false)
}

// encodeRun is encodeRequest, without the capture when noCapture (supRequest.NoCapture).
func encodeRun(c guard.Checked, uid int, eg *sandboxEgress, noCapture bool) ([]byte, error) {
	if c.Language != guard.Python && c.Language != guard.Shell {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("docker backend: language %q is not offered (offered: %s, %s)", c.Language, guard.Python, guard.Shell)}
	}
	req := supRequest{
		V:         protocolVersion,
		Language:  c.Language,
		Code:      []byte(c.Code),
		TimeoutMS: c.Limits.Timeout.Milliseconds(),
		NoCapture: noCapture,
		supCaps:   capsOf(c.Limits),
	}
	if req.TimeoutMS <= 0 {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("docker backend: timeout %s is not positive", c.Limits.Timeout)}
	}
	setup, err := setupOf(c.Files, c.Env, uid, eg)
	if err != nil {
		return nil, err
	}
	req.supSetup = setup
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("docker: encode request: %w", err)
	}
	return encodeFrame(frameRequest, 0, b), nil
}

// exitReport is the payload of frameExit. The supervisor is out of the code's reach, but the
// worker still trusts nothing in it beyond what it can check.
type exitReport struct {
	ExitCode int  `json:"exit_code"`
	Signal   int  `json:"signal"`
	TimedOut bool `json:"timed_out"`
	// Cancelled (sessions only) says the worker stopped the cell (SIGUSR1 to the supervisor):
	// its processes were killed, the session's container lives on.
	Cancelled   bool  `json:"cancelled"`
	DurationMS  int64 `json:"duration_ms"`
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
	// StdoutSHA256 and StderrSHA256 are the SHA-256 (hex) of every byte the code wrote to the
	// stream, kept or not, for the host's receipt; empty from an image whose Python has no
	// hashlib.
	StdoutSHA256 string `json:"stdout_sha256,omitempty"`
	StderrSHA256 string `json:"stderr_sha256,omitempty"`
	PidsLimitHit bool   `json:"pids_limit_hit"`
	OOMKills     int    `json:"oom_kills"`
	// LimitsKnown says the supervisor could read the pids and memory cgroup counters (under runc;
	// gVisor has no cgroup files), so PidsLimitHit and OOMKills are complete without asking the
	// daemon.
	LimitsKnown bool `json:"limits_known"`
	// StateReset (sessions only) says this Python cell ran in a fresh interpreter because the
	// one of earlier cells died (a timeout, os._exit, a signal, a memory kill).
	StateReset bool `json:"state_reset"`
	// ThreadsAlive (sessions only) is how many threads besides its driver's the supervisor
	// counted in the session's interpreter when the cell ended (/proc/PID/task).
	ThreadsAlive int `json:"threads_alive"`
	// ReportedBy (sessions only) is "interpreter" when the cell's end and exit code are what its
	// interpreter's driver reported (guard.Result.ExitReportedBy), absent when the supervisor
	// measured them.
	ReportedBy string `json:"exit_reported_by"`
	// FilesBytes is what /work, /tmp and /dev/shm held when the code ended, as their
	// filesystems count it (used blocks); -1 when the supervisor could read none of them.
	FilesBytes int64 `json:"files_bytes"`
}

// endReport is the payload of frameEnd, and of a session's frameReady and frameCellEnd.
type endReport struct {
	FilesTruncated   bool `json:"files_truncated"`
	OutputsTruncated bool `json:"outputs_truncated"`
	// Cell (frameCellEnd) is the index of the cell that ended.
	Cell int `json:"cell,omitempty"`
	// Nonce (frameReady, frameCellEnd) echoes the session request's Nonce: the code never sees
	// it, so a frame that carries it was written by the supervisor (AdoptSession reads the
	// container's kept output by it).
	Nonce string `json:"nonce,omitempty"`
}

// maxResultBytes bounds everything the worker reads from the supervisor for limits l: the
// caps, the files and room for headers and reports. More is an IntegrationError, and reading
// stops there.
func maxResultBytes(l guard.Limits) int64 {
	const overhead, perFile = 64 << 10, 4 << 10
	return overhead + l.MaxStdoutBytes + l.MaxStderrBytes + l.MaxTotalFileBytes + int64(l.MaxFiles)*perFile +
		l.MaxTotalOutputBytes + int64(l.MaxOutputs)*perFile
}

// maxFramePayload bounds one frame's payload (the supervisor sends at most 1 MiB of output per
// frame; a file frame holds one file).
const maxFramePayload = 16 << 20

var errResultTooLarge = errors.New("sandbox output is over the result bound")

// report is what the worker has read from the supervisor so far. It is an io.Writer fed with the
// container's stdout; it parses frames as they arrive and keeps at most the caps.
type report struct {
	limits   guard.Limits
	max      int64
	received int64
	// tunnelled counts the bytes of tunnel frames, which the egress proxy bounds, not max.
	tunnelled int64
	pending   []byte
	// tunnel takes the tunnel frames of a run with egress; nil otherwise.
	tunnel *tunnel
	// tunnelLost drops the tunnel frames of an adopted run with egress: the worker that
	// carried its connections is gone.
	tunnelLost bool
	// session is set for a session's cell (frameCellEnd ends it) or its opening (opening set:
	// frameReady ends it); endKind is the frame that ended the report.
	session, opening bool
	endKind          frameType

	stdout, stderr *guard.CapBuffer
	files          []guard.File
	filesTruncated bool
	outputs        []guard.Output
	// outputsTruncated: an output was dropped or left out (by the supervisor or here).
	outputsTruncated bool
	exit             *exitReport
	end              *endReport
	// endSeen is closed when the end frame has been read: nothing follows it, so the run need
	// not wait for the container's teardown to close the stream.
	endSeen chan struct{}
	// err is the error that stopped the parsing, if any.
	err       error
	supErr    string
	configErr bool
}

// newReport returns the report of one run or cell; its streams pass what they keep to out (see
// guard.OutputFunc), when out is not nil.
func newReport(l guard.Limits, out guard.OutputFunc) *report {
	return &report{
		limits:  l,
		max:     maxResultBytes(l),
		stdout:  guard.NewCapBuffer(l.MaxStdoutBytes).Tee(out, guard.StreamStdout),
		stderr:  guard.NewCapBuffer(l.MaxStderrBytes).Tee(out, guard.StreamStderr),
		endSeen: make(chan struct{}),
	}
}

// Write parses frames; an error stops the copy from the container and is kept in r.err.
func (r *report) Write(p []byte) (int, error) {
	n, err := r.write(p)
	if err != nil && r.err == nil {
		r.err = err
	}
	return n, err
}

func (r *report) write(p []byte) (int, error) {
	r.received += int64(len(p))
	if r.received-r.tunnelled > r.max {
		return 0, fmt.Errorf("%w (%d bytes)", errResultTooLarge, r.max)
	}
	r.pending = append(r.pending, p...)
	for len(r.pending) >= frameHeaderBytes {
		n := binary.BigEndian.Uint32(r.pending[0:4])
		if n > maxFramePayload {
			return 0, fmt.Errorf("sandbox frame of %d bytes is over %d", n, maxFramePayload)
		}
		if len(r.pending) < frameHeaderBytes+int(n) {
			break
		}
		t, ch := frameType(r.pending[4]), binary.BigEndian.Uint32(r.pending[5:9])
		payload := r.pending[frameHeaderBytes : frameHeaderBytes+int(n)]
		if err := r.frame(t, ch, payload); err != nil {
			return 0, err
		}
		r.pending = r.pending[frameHeaderBytes+int(n):]
	}
	if len(r.pending) == 0 {
		r.pending = nil
	}
	return len(p), nil
}

// frame takes one frame's payload into the report.
func (r *report) frame(t frameType, ch uint32, payload []byte) error {
	if r.end != nil {
		return errors.New("sandbox sent a frame after its end frame")
	}
	if ch != 0 && (r.tunnel != nil || r.tunnelLost) {
		r.tunnelled += frameHeaderBytes + int64(len(payload))
		if r.tunnel == nil {
			return nil
		}
		return r.tunnel.handle(t, ch, payload)
	}
	if ch != 0 {
		return fmt.Errorf("sandbox sent a frame of type %d on channel %d; no channel is open", t, ch)
	}
	switch t {
	case frameStdout:
		_, _ = r.stdout.Write(payload)
	case frameStderr:
		_, _ = r.stderr.Write(payload)
	case frameFile:
		return r.file(payload)
	case frameOutput:
		return r.output1(payload)
	case frameExit:
		var e exitReport
		if err := json.Unmarshal(payload, &e); err != nil || r.exit != nil {
			return fmt.Errorf("sandbox exit report is unreadable or repeated: %v", err)
		}
		r.exit = &e
	case frameEnd, frameCellEnd, frameReady:
		if t == frameCellEnd && (!r.session || r.opening) || t == frameReady && !r.opening {
			return fmt.Errorf("sandbox sent a frame of type %d out of place", t)
		}
		var e endReport
		if err := json.Unmarshal(payload, &e); err != nil {
			return fmt.Errorf("sandbox end report is unreadable: %w", err)
		}
		r.end, r.endKind = &e, t
		r.filesTruncated = r.filesTruncated || e.FilesTruncated
		r.outputsTruncated = r.outputsTruncated || e.OutputsTruncated
		close(r.endSeen)
	case frameError, frameConfigError:
		r.supErr = string(clip(payload))
		r.configErr = t == frameConfigError
	default:
		return fmt.Errorf("sandbox sent a frame of unknown type %d", t)
	}
	return nil
}

// file takes one produced file; a name that is not valid UTF-8 is dropped and sets
// filesTruncated (guard.Enforce drops the rest of the unsafe, colliding and oversized ones).
func (r *report) file(payload []byte) error {
	if len(payload) < 2 {
		return errors.New("sandbox file frame is too short")
	}
	n := int(binary.BigEndian.Uint16(payload[0:2]))
	if len(payload) < 2+n {
		return errors.New("sandbox file frame has a name longer than the frame")
	}
	name, content := payload[2:2+n], payload[2+n:]
	if !utf8.Valid(name) {
		r.filesTruncated = true
		return nil
	}
	r.files = append(r.files, guard.File{Name: string(name), Size: int64(len(content)), Content: append([]byte(nil), content...)})
	return nil
}

// output1 takes one output frame; one past the output caps is dropped (guard.Enforce applies
// them again).
func (r *report) output1(payload []byte) error {
	if len(payload) < 2 {
		return errors.New("sandbox output frame is too short")
	}
	n := int(binary.BigEndian.Uint16(payload[0:2]))
	if len(payload) < 2+n {
		return errors.New("sandbox output frame has a header longer than the frame")
	}
	var h outputHeader
	if err := json.Unmarshal(payload[2:2+n], &h); err != nil {
		return fmt.Errorf("sandbox output header is unreadable: %w", err)
	}
	data := payload[2+n:]
	if len(r.outputs) >= r.limits.MaxOutputs || int64(len(data)) > r.limits.MaxOutputBytes {
		r.outputsTruncated = true
		return nil
	}
	o := guard.Output{Index: h.Index, Source: h.Source, MIME: h.MIME, Size: h.Size, LeftOut: h.LeftOut}
	if !h.LeftOut {
		o.Data, o.Size = append([]byte(nil), data...), int64(len(data))
	}
	r.outputs = append(r.outputs, o)
	return nil
}

// output returns the output received so far (the streams already within their caps; Run
// applies every limit once, before it returns).
func (r *report) output() guard.Result {
	res := guard.Result{
		Stdout:           r.stdout.Bytes(),
		Stderr:           r.stderr.Bytes(),
		StdoutTruncated:  r.stdout.Truncated(),
		StderrTruncated:  r.stderr.Truncated(),
		Files:            r.files,
		FilesTruncated:   r.filesTruncated,
		Outputs:          r.outputs,
		OutputsTruncated: r.outputsTruncated,
	}
	if r.exit != nil {
		res.StdoutTruncated = res.StdoutTruncated || r.exit.StdoutBytes > r.limits.MaxStdoutBytes
		res.StderrTruncated = res.StderrTruncated || r.exit.StderrBytes > r.limits.MaxStderrBytes
		res.Measured = r.exit.measured()
	}
	return res
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

// supSession is the session request document (frameSession): a run's request without code,
// language, timeout or caps, which come with each cell. The egress fields are a run's: the
// supervisor listens for the whole session, and each cell's connections are tunnelled to that
// cell's proxy.
type supSession struct {
	V int `json:"v"` // protocolVersion
	// Nonce is the session's secret (hex, LabelSessionNonce), echoed in frameReady and each
	// frameCellEnd; the supervisor keeps it from the code.
	Nonce string `json:"nonce"`
	// The input files are written to /work before the first cell; the env is every cell's.
	supSetup
}

// supCell is one cell (frameCell).
type supCell struct {
	Index     int    `json:"index"`
	Language  string `json:"language"`
	Code      []byte `json:"code"`
	TimeoutMS int64  `json:"timeout_ms"`
	// Packages names the subfolder of the session's package mount holding the environment the
	// cell's packages completed (cellpackages.go); "" for none.
	Packages string `json:"packages,omitempty"`
	supCaps
}

// encodeSession returns the session request frame for s, run as uid with the session's nonce,
// with the sandbox's side of its egress (nil when it has none).
func encodeSession(s guard.CheckedSession, uid int, nonce string, eg *sandboxEgress) ([]byte, error) {
	setup, err := setupOf(s.Files, s.Env, uid, eg)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(supSession{V: protocolVersion, Nonce: nonce, supSetup: setup})
	if err != nil {
		return nil, fmt.Errorf("docker: encode session request: %w", err)
	}
	return encodeFrame(frameSession, 0, b), nil
}

// encodeCell returns the cell frame of cell under limits l.
func encodeCell(cell guard.Cell, l guard.Limits, packages string) ([]byte, error) {
	if cell.Language != guard.Python && cell.Language != guard.Shell {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("docker backend: language %q is not offered (offered: %s, %s)", cell.Language, guard.Python, guard.Shell)}
	}
	if l.Timeout.Milliseconds() <= 0 {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("docker backend: cell timeout %s is not positive", l.Timeout)}
	}
	if cell.Index < 1 {
		return nil, &guard.ToolUsageError{Msg: fmt.Sprintf("docker backend: cell index %d: cells are numbered from 1", cell.Index)}
	}
	b, err := json.Marshal(supCell{
		Index: cell.Index, Language: cell.Language, Code: []byte(cell.Code), TimeoutMS: l.Timeout.Milliseconds(),
		Packages: packages, supCaps: capsOf(l),
	})
	if err != nil {
		return nil, fmt.Errorf("docker: encode cell: %w", err)
	}
	return encodeFrame(frameCell, 0, b), nil
}

// measured is what the supervisor measured of the whole streams, for the host's receipt (nil
// parts when it hashed nothing). The runtime is the backend's to add.
func (e *exitReport) measured() *guard.Measured {
	m := &guard.Measured{}
	if isHexSHA256(e.StdoutSHA256) && isHexSHA256(e.StderrSHA256) {
		m.Stdout = &guard.StreamMeasure{Bytes: e.StdoutBytes, SHA256: e.StdoutSHA256}
		m.Stderr = &guard.StreamMeasure{Bytes: e.StderrBytes, SHA256: e.StderrSHA256}
	}
	return m
}

func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
