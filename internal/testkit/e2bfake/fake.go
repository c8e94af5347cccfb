// Package e2bfake is a fake E2B for tests: an API server and an envd server on loopback that
// follow E2B's published OpenAPI spec (spec/openapi.yml) and envd protocol (spec/envd/envd.yaml,
// process.proto, filesystem.proto in github.com/e2b-dev/E2B), and run each sandbox's processes
// as real local python3 and sh processes in a temporary folder, so results are real.
//
// Its types are its own, written from the spec, not shared with backends/e2b: a fake that reused
// the client's types would agree with the client by construction. Point a client at it with
// E2B_API_URL=Server.APIURL() and E2B_SANDBOX_URL=Server.SandboxURL() (the SDKs' variables).
// It is for tests only: it runs whatever code it is sent as the test's user.
package e2bfake

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is E2B as its published OpenAPI spec (spec/openapi.yml) and envd protocol
// (spec/envd/envd.yaml, process.proto, filesystem.proto in e2b-dev/E2B) describe it: an API
// server (X-API-Key; POST /sandboxes answers 201 with a Sandbox; GET /v2/sandboxes filters by a
// metadata query; GET /sandboxes/{id} answers the sandbox or 404; DELETE /sandboxes/{id} answers
// 204 or 404; POST /sandboxes/{id}/timeout sets its time to live from now, 204 or 404; a sandbox
// whose time to live passes is killed; errors are {code, message}) and an envd server (routed by
// E2b-Sandbox-Id, guarded by X-Access-Token for secure sandboxes; POST and GET /files; Connect
// unary ListDir (with modifiedTime) and MakeDir; Connect server-streaming Process/Start with
// envelope framing, start/data/end events and an end-of-stream message, killing the process at
// Connect-Timeout-Ms, its stdin kept open when asked; unary Process/SendInput and
// Process/SendSignal by pid). A killed sandbox's processes die and its open envd streams drop
// without an end, as a VM's connections do. Each sandbox is a temporary folder that stands for its root, and its
// processes are real local python3 and sh processes, so results are real.
type Server struct {
	t    testing.TB
	key  string
	api  *httptest.Server
	envd *httptest.Server

	mu        sync.Mutex
	sandboxes map[string]*fakeSandbox
	creates   []CreateRequest
	kills     []string
	expired   []string
	timeouts  []int
	starts    int
	envdKeys  int
	faults    Faults
}

// Faults are the failure modes of the fake.
type Faults struct {
	// RateLimit answers 429 Too Many Requests to this many creates, with RetryAfter as the
	// Retry-After header.
	RateLimit  int
	RetryAfter string
	// CreateDelay makes each create wait this long and then answer 504, as E2B does when a
	// sandbox could not be placed in time.
	CreateDelay time.Duration
	// CutStream drops the connection of a process stream after its first output.
	CutStream bool
	// FailKill answers 500 to every DELETE /sandboxes/{id}.
	FailKill bool
}

// CreateRequest is the body of POST /sandboxes (the spec's NewSandbox).
type CreateRequest struct {
	TemplateID          string            `json:"templateID"`
	Timeout             int               `json:"timeout"`
	AutoPause           bool              `json:"autoPause"`
	Secure              bool              `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Network             *NetworkConfig    `json:"network"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
}

// NetworkConfig is the spec's SandboxNetworkConfig, as far as egress goes.
type NetworkConfig struct {
	AllowPublicTraffic *bool    `json:"allowPublicTraffic"`
	AllowOut           []string `json:"allowOut"`
	DenyOut            []string `json:"denyOut"`
}

// Record is what the fake saw.
type Record struct {
	// Creates are the bodies of every POST /sandboxes, rate-limited ones included.
	Creates []CreateRequest
	// Kills are the ids of the sandboxes killed by DELETE.
	Kills []string
	// Starts counts processes started: how many times code ran.
	Starts int
	// Expired are the ids of the sandboxes E2B ended itself when their time to live passed.
	Expired []string
	// Timeouts are the bodies' timeouts (seconds) of every POST /sandboxes/{id}/timeout.
	Timeouts []int
	// Live counts sandboxes not killed.
	Live int
	// EnvdRequestsWithKey counts envd requests that carried the API key; it must stay 0.
	EnvdRequestsWithKey int
}

type errorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type connectError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type processConfig struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Envs map[string]string `json:"envs"`
	Cwd  *string           `json:"cwd"`
}

type fakeSandbox struct {
	id, token string
	root      string
	meta      map[string]string
	started   time.Time
	procs     []*exec.Cmd
	// running holds the processes not yet waited for, by pid; stdin the stdin of each started
	// with stdin true.
	running map[int]*os.Process
	stdin   map[int]io.WriteCloser
	// ttl ends the sandbox when its time to live passes; end is when.
	ttl *time.Timer
	end time.Time
	// dead is closed when the sandbox is killed: its envd connections drop, as a VM's do.
	dead chan struct{}
}

// Start starts a fake E2B that accepts key and stops when t ends.
func Start(t testing.TB, key string) *Server {
	t.Helper()
	f := &Server{t: t, key: key, sandboxes: map[string]*fakeSandbox{}}
	api := http.NewServeMux()
	api.HandleFunc("POST /sandboxes", f.create)
	api.HandleFunc("GET /v2/sandboxes", f.list)
	api.HandleFunc("DELETE /sandboxes/{id}", f.kill)
	api.HandleFunc("GET /sandboxes/{id}", f.detail)
	api.HandleFunc("POST /sandboxes/{id}/timeout", f.setTimeout)
	f.api = httptest.NewServer(f.auth(api))
	envd := http.NewServeMux()
	envd.HandleFunc("POST /files", f.sandbox(f.upload))
	envd.HandleFunc("GET /files", f.sandbox(f.download))
	envd.HandleFunc("POST /filesystem.Filesystem/ListDir", f.sandbox(f.listDir))
	envd.HandleFunc("POST /filesystem.Filesystem/MakeDir", f.sandbox(f.makeDir))
	envd.HandleFunc("POST /process.Process/Start", f.sandbox(f.start))
	envd.HandleFunc("POST /process.Process/SendInput", f.sandbox(f.sendInput))
	envd.HandleFunc("POST /process.Process/SendSignal", f.sandbox(f.sendSignal))
	f.envd = httptest.NewServer(envd)
	t.Cleanup(func() {
		// Sandboxes first: a process stream open on envd keeps its handler, and so Close, waiting.
		f.mu.Lock()
		for _, s := range f.sandboxes {
			f.remove(s)
		}
		f.mu.Unlock()
		f.api.Close()
		f.envd.Close()
	})
	return f
}

// APIURL is the base URL of the fake API (E2B_API_URL).
func (f *Server) APIURL() string { return f.api.URL }

// SandboxURL is the base URL of every fake sandbox's envd (E2B_SANDBOX_URL); the sandbox is chosen
// by the E2b-Sandbox-Id header, as on E2B's own domains.
func (f *Server) SandboxURL() string { return f.envd.URL }

// SetFaults replaces the failure modes; requests may be in flight.
func (f *Server) SetFaults(faults Faults) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = faults
}

func apiErr(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(errorBody{Code: code, Message: msg})
}

func (f *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("X-API-Key"); got != f.key {
			// A hostile echo of what it was sent, to prove the client redacts it.
			apiErr(w, http.StatusUnauthorized, "Invalid API key "+strconv.Quote(got))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (f *Server) create(w http.ResponseWriter, r *http.Request) {
	var body CreateRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.TemplateID == "" {
		apiErr(w, http.StatusBadRequest, "bad body")
		return
	}
	f.mu.Lock()
	f.creates = append(f.creates, body)
	limited := f.faults.RateLimit > 0
	if limited {
		f.faults.RateLimit--
	}
	delay, after := f.faults.CreateDelay, f.faults.RetryAfter
	f.mu.Unlock()
	if limited {
		w.Header().Set("Retry-After", after)
		apiErr(w, http.StatusTooManyRequests, "rate limit exceeded")
		return
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
		}
		apiErr(w, http.StatusGatewayTimeout, "sandbox_placement_timeout")
		return
	}
	root := f.t.TempDir()
	s := &fakeSandbox{id: fmt.Sprintf("ifake%04d", len(f.creates)), token: "envd-token-" + strconv.Itoa(len(f.creates)),
		root: root, meta: body.Metadata, started: time.Now(), running: map[int]*os.Process{}, stdin: map[int]io.WriteCloser{}, dead: make(chan struct{})}
	_ = os.MkdirAll(filepath.Join(root, "home/user"), 0o755)
	f.mu.Lock()
	f.sandboxes[s.id] = s
	ttl := time.Duration(body.Timeout) * time.Second
	if body.Timeout == 0 {
		ttl = 15 * time.Second // the spec's default
	}
	f.expireAfter(s, ttl)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"templateID": body.TemplateID, "sandboxID": s.id, "clientID": "6532622b",
		"envdVersion": "0.2.0", "envdAccessToken": s.token, "domain": nil})
}

func (f *Server) list(w http.ResponseWriter, r *http.Request) {
	filter, err := url.ParseQuery(r.URL.Query().Get("metadata"))
	if err != nil {
		apiErr(w, http.StatusBadRequest, "bad metadata query")
		return
	}
	f.mu.Lock()
	out := []map[string]any{}
	for _, s := range f.sandboxes {
		match := true
		for k := range filter {
			match = match && s.meta[k] == filter.Get(k)
		}
		if match {
			out = append(out, s.listed())
		}
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// listed is the spec's ListedSandbox of s (and, as far as these fields go, its SandboxDetail).
func (s *fakeSandbox) listed() map[string]any {
	return map[string]any{"templateID": "base", "sandboxID": s.id, "clientID": "6532622b",
		"startedAt": s.started.UTC().Format(time.RFC3339Nano), "endAt": s.end.UTC().Format(time.RFC3339Nano),
		"cpuCount": 2, "memoryMB": 512, "diskSizeMB": 1024, "metadata": s.meta, "state": "running", "envdVersion": "0.2.0"}
}

// expireAfter (re)sets s's time to live: E2B kills the sandbox when it passes. f.mu is held.
func (f *Server) expireAfter(s *fakeSandbox, d time.Duration) {
	if s.ttl != nil {
		s.ttl.Stop()
	}
	s.end = time.Now().Add(d)
	s.ttl = time.AfterFunc(d, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.sandboxes[s.id] != s || time.Now().Before(s.end) {
			return
		}
		f.expired = append(f.expired, s.id)
		f.remove(s)
	})
}

// remove kills s's processes, drops its envd connections and forgets it. f.mu is held.
func (f *Server) remove(s *fakeSandbox) {
	s.ttl.Stop()
	close(s.dead)
	s.killAll()
	delete(f.sandboxes, s.id)
}

func (f *Server) kill(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.faults.FailKill {
		apiErr(w, http.StatusInternalServerError, "kill failed")
		return
	}
	s, ok := f.sandboxes[id]
	if !ok {
		apiErr(w, http.StatusNotFound, "sandbox "+id+" not found")
		return
	}
	f.kills = append(f.kills, id)
	f.remove(s)
	w.WriteHeader(http.StatusNoContent)
}

// detail answers GET /sandboxes/{id}: the sandbox, or 404 once it is gone.
func (f *Server) detail(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	s, ok := f.sandboxes[r.PathValue("id")]
	var body map[string]any
	if ok {
		body = s.listed()
	}
	f.mu.Unlock()
	if !ok {
		apiErr(w, http.StatusNotFound, "sandbox "+r.PathValue("id")+" not found")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// setTimeout answers POST /sandboxes/{id}/timeout ({"timeout": seconds}): the sandbox now ends
// that long from now; 204, or 404 once it is gone.
func (f *Server) setTimeout(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Timeout *int `json:"timeout"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Timeout == nil || *body.Timeout < 0 {
		apiErr(w, http.StatusBadRequest, "bad body")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sandboxes[r.PathValue("id")]
	if !ok {
		apiErr(w, http.StatusNotFound, "sandbox "+r.PathValue("id")+" not found")
		return
	}
	f.timeouts = append(f.timeouts, *body.Timeout)
	f.expireAfter(s, time.Duration(*body.Timeout)*time.Second)
	w.WriteHeader(http.StatusNoContent)
}

func (s *fakeSandbox) killAll() {
	for _, c := range s.procs {
		if c.Process != nil {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		}
	}
}

// host maps a sandbox path (absolute, or relative to /home/user) into the sandbox's folder.
func (s *fakeSandbox) host(p string) (string, bool) {
	if !strings.HasPrefix(p, "/") {
		p = "/home/user/" + p
	}
	clean := filepath.Clean(p)
	if clean != p && clean+"/" != p {
		return "", false
	}
	return filepath.Join(s.root, clean), true
}

// sandbox routes an envd request to its sandbox and checks its headers.
func (f *Server) sandbox(h func(http.ResponseWriter, *http.Request, *fakeSandbox)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		s := f.sandboxes[r.Header.Get("E2b-Sandbox-Id")]
		if r.Header.Get("X-API-Key") != "" || strings.Contains(fmt.Sprint(r.Header, r.URL), f.key) {
			f.envdKeys++
		}
		f.mu.Unlock()
		switch user, pass, ok := r.BasicAuth(); {
		case s == nil || r.Header.Get("E2b-Sandbox-Port") != "49983":
			http.Error(w, "sandbox not found", http.StatusBadGateway)
		case r.Header.Get("X-Access-Token") != s.token:
			apiErr(w, http.StatusUnauthorized, "invalid access token")
		case !ok || user != "user" || pass != "":
			apiErr(w, http.StatusUnauthorized, "no user specified")
		default:
			h(w, r, s)
		}
	}
}

func (f *Server) upload(w http.ResponseWriter, r *http.Request, s *fakeSandbox) {
	p, ok := s.host(r.URL.Query().Get("path"))
	if !ok || r.URL.Query().Get("username") != "user" {
		apiErr(w, http.StatusBadRequest, "invalid path")
		return
	}
	part, err := func() (io.Reader, error) {
		mr, err := r.MultipartReader()
		if err != nil {
			return nil, err
		}
		for {
			part, err := mr.NextPart()
			if err != nil {
				return nil, err
			}
			if part.FormName() == "file" {
				return part, nil
			}
		}
	}()
	if err == nil {
		err = os.MkdirAll(filepath.Dir(p), 0o755)
	}
	if err == nil {
		var data []byte
		if data, err = io.ReadAll(part); err == nil {
			err = os.WriteFile(p, data, 0o644)
		}
	}
	if err != nil {
		apiErr(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode([]map[string]string{{"path": r.URL.Query().Get("path"), "name": filepath.Base(p), "type": "file"}})
}

func (f *Server) download(w http.ResponseWriter, r *http.Request, s *fakeSandbox) {
	p, ok := s.host(r.URL.Query().Get("path"))
	if !ok {
		apiErr(w, http.StatusBadRequest, "invalid path")
		return
	}
	data, err := os.ReadFile(p)
	if err != nil {
		apiErr(w, http.StatusNotFound, "path does not exist")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(data)
}

// unary reads a Connect unary JSON request and checks its headers.
func unary(w http.ResponseWriter, r *http.Request, in any) bool {
	if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Connect-Protocol-Version") != "1" {
		http.Error(w, "unsupported media type", http.StatusUnsupportedMediaType)
		return false
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(in); err != nil {
		connectErr(w, http.StatusBadRequest, "invalid_argument", err.Error())
		return false
	}
	return true
}

func connectErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(connectError{Code: code, Message: msg})
}

// fsRequest is the request of the filesystem service's calls (MakeDir, ListDir).
type fsRequest struct {
	Path  string `json:"path"`
	Depth int    `json:"depth"`
}

// fsRequest reads a filesystem call's request and maps its path into the sandbox's directory,
// answering the error itself when either fails.
func (s *fakeSandbox) fsRequest(w http.ResponseWriter, r *http.Request) (in fsRequest, path string, ok bool) {
	if !unary(w, r, &in) {
		return in, "", false
	}
	if path, ok = s.host(in.Path); !ok {
		connectErr(w, http.StatusBadRequest, "invalid_argument", "bad path")
	}
	return in, path, ok
}

func (f *Server) makeDir(w http.ResponseWriter, r *http.Request, s *fakeSandbox) {
	in, p, ok := s.fsRequest(w, r)
	if !ok {
		return
	}
	if _, err := os.Stat(p); err == nil {
		connectErr(w, http.StatusConflict, "already_exists", "directory already exists: "+in.Path)
		return
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		connectErr(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"entry": map[string]any{"name": filepath.Base(p), "type": "FILE_TYPE_DIRECTORY", "path": in.Path}})
}

func (f *Server) listDir(w http.ResponseWriter, r *http.Request, s *fakeSandbox) {
	in, p, ok := s.fsRequest(w, r)
	if !ok {
		return
	}
	entries := []map[string]any{}
	err := filepath.WalkDir(p, func(hp string, d fs.DirEntry, err error) error {
		if err != nil || hp == p {
			return err
		}
		rel, _ := filepath.Rel(p, hp)
		if strings.Count(rel, "/")+1 > max(in.Depth, 1) {
			return fs.SkipDir
		}
		info, err := os.Lstat(hp)
		if err != nil {
			return err
		}
		typ := "FILE_TYPE_FILE"
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			typ = "FILE_TYPE_SYMLINK"
		case d.IsDir():
			typ = "FILE_TYPE_DIRECTORY"
		}
		// int64 in proto JSON is a string.
		entries = append(entries, map[string]any{"name": d.Name(), "type": typ, "path": strings.TrimRight(in.Path, "/") + "/" + rel,
			"size": strconv.FormatInt(info.Size(), 10), "permissions": info.Mode().String(), "owner": "user", "group": "user",
			"modifiedTime": info.ModTime().UTC().Format(time.RFC3339Nano)})
		return nil
	})
	if err != nil {
		connectErr(w, http.StatusNotFound, "not_found", err.Error())
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"entries": entries})
}

// startRequest is process.StartRequest in its JSON form.
type startRequest struct {
	Process processConfig `json:"process"`
	Stdin   *bool         `json:"stdin"`
}

func (f *Server) start(w http.ResponseWriter, r *http.Request, s *fakeSandbox) {
	if r.Header.Get("Content-Type") != "application/connect+json" || r.Header.Get("Connect-Protocol-Version") != "1" {
		http.Error(w, "unsupported media type", http.StatusUnsupportedMediaType)
		return
	}
	var in startRequest
	flags, msg, err := readFrame(r.Body)
	if err == nil && flags != 0 {
		err = fmt.Errorf("flags %d", flags)
	}
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(msg))
		dec.DisallowUnknownFields()
		err = dec.Decode(&in)
	}
	w.Header().Set("Content-Type", "application/connect+json")
	if err != nil {
		writeEnd(w, &connectError{Code: "invalid_argument", Message: err.Error()})
		return
	}
	timeoutMs, _ := strconv.Atoi(r.Header.Get("Connect-Timeout-Ms"))
	cmd, err := s.command(in.Process)
	if err == nil {
		err = f.run(w, s, cmd, time.Duration(timeoutMs)*time.Millisecond, in.Stdin != nil && *in.Stdin)
	}
	if err != nil {
		writeEnd(w, &connectError{Code: "internal", Message: err.Error()})
	}
}

// command maps a process config onto a local process in the sandbox's folder.
func (s *fakeSandbox) command(pc processConfig) (*exec.Cmd, error) {
	interp := map[string]string{"python3": "python3", "/bin/sh": "/bin/sh"}[pc.Cmd]
	if interp == "" {
		return nil, fmt.Errorf("fake envd runs python3 and /bin/sh only, not %q", pc.Cmd)
	}
	var args []string
	for _, a := range pc.Args {
		// A path inside the sandbox (a code file) maps into its folder; any other argument (code
		// given with -c) is left as it is.
		if hp, ok := s.host(a); ok && strings.HasPrefix(a, "/") {
			if _, err := os.Stat(hp); err == nil {
				a = hp
			}
		}
		args = append(args, a)
	}
	cmd := exec.Command(interp, args...)
	cwd := "/home/user"
	if pc.Cwd != nil {
		cwd = *pc.Cwd
	}
	cmd.Dir, _ = s.host(cwd)
	home, _ := s.host("/home/user")
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home}
	for k, v := range pc.Envs {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, nil
}

// run starts cmd and streams its events; envd kills the process when timeout passes, and not
// when the client goes away.
func (f *Server) run(w http.ResponseWriter, s *fakeSandbox, cmd *exec.Cmd, timeout time.Duration, keepStdin bool) error {
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	var stdin io.WriteCloser
	if keepStdin {
		stdin, _ = cmd.StdinPipe()
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	f.mu.Lock()
	s.procs = append(s.procs, cmd)
	s.running[cmd.Process.Pid] = cmd.Process
	if stdin != nil {
		s.stdin[cmd.Process.Pid] = stdin
	}
	f.starts++
	cut := f.faults.CutStream
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(s.stdin, cmd.Process.Pid)
		f.mu.Unlock()
	}()
	if timeout > 0 {
		timer := time.AfterFunc(timeout, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		defer timer.Stop()
	}
	quit := make(chan struct{})
	defer close(quit)
	events := outputEvents(stdout, stderr, quit)
	writeEvent(w, map[string]any{"start": map[string]any{"pid": cmd.Process.Pid}})
	for ev := range events {
		select {
		case <-s.dead:
			panic(http.ErrAbortHandler) // the sandbox was killed: its connections drop
		default:
		}
		writeEvent(w, ev)
		if cut {
			panic(http.ErrAbortHandler) // the connection drops mid-run
		}
	}
	_ = cmd.Wait()
	f.mu.Lock()
	delete(s.running, cmd.Process.Pid)
	f.mu.Unlock()
	select {
	case <-s.dead:
		panic(http.ErrAbortHandler)
	default:
	}
	writeEvent(w, map[string]any{"end": endEvent(cmd.ProcessState)})
	writeEnd(w, nil)
	return nil
}

// outputEvents streams what a process prints on stdout and stderr as envd's data events, until
// both end (then the channel closes) or quit closes.
func outputEvents(stdout, stderr io.Reader, quit <-chan struct{}) <-chan map[string]any {
	events := make(chan map[string]any)
	var wg sync.WaitGroup
	pump := func(r io.Reader, name string) {
		defer wg.Done()
		br := bufio.NewReader(r)
		buf := make([]byte, 4096)
		for {
			n, err := br.Read(buf)
			if n > 0 {
				select {
				case events <- map[string]any{"data": map[string]any{name: base64.StdEncoding.EncodeToString(buf[:n])}}:
				case <-quit:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	wg.Add(2)
	go pump(stdout, "stdout")
	go pump(stderr, "stderr")
	go func() { wg.Wait(); close(events) }()
	return events
}

// endEvent is envd's end event of a process that exited with st.
func endEvent(st *os.ProcessState) map[string]any {
	end := map[string]any{"exited": st.Exited(), "status": st.String()}
	if code := st.ExitCode(); code != 0 {
		end["exitCode"] = code // proto JSON leaves zero values out
	}
	return end
}

// processSelector is process.ProcessSelector: a pid or a tag.
type processSelector struct {
	Pid *int    `json:"pid"`
	Tag *string `json:"tag"`
}

// sendInput answers process.Process/SendInput: {"process": {"pid"}, "input": {"stdin": base64}}
// writes to the stdin of a process started with stdin true.
func (f *Server) sendInput(w http.ResponseWriter, r *http.Request, s *fakeSandbox) {
	var in struct {
		Process processSelector `json:"process"`
		Input   struct {
			Stdin []byte `json:"stdin"`
			Pty   []byte `json:"pty"`
		} `json:"input"`
	}
	if !unary(w, r, &in) {
		return
	}
	if in.Process.Pid == nil {
		connectErr(w, http.StatusBadRequest, "invalid_argument", "process selector: the fake selects by pid only")
		return
	}
	f.mu.Lock()
	stdin := s.stdin[*in.Process.Pid]
	f.mu.Unlock()
	if stdin == nil {
		connectErr(w, http.StatusNotFound, "not_found", fmt.Sprintf("process with pid %d not found", *in.Process.Pid))
		return
	}
	if _, err := stdin.Write(in.Input.Stdin); err != nil {
		connectErr(w, http.StatusInternalServerError, "internal", "error writing to stdin: "+err.Error())
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{})
}

// sendSignal answers process.Process/SendSignal: {"process": {"pid"}, "signal": "SIGNAL_SIGKILL"
// or "SIGNAL_SIGTERM"} signals a process the sandbox started.
func (f *Server) sendSignal(w http.ResponseWriter, r *http.Request, s *fakeSandbox) {
	var in struct {
		Process processSelector `json:"process"`
		Signal  string          `json:"signal"`
	}
	if !unary(w, r, &in) {
		return
	}
	sig := map[string]syscall.Signal{"SIGNAL_SIGKILL": syscall.SIGKILL, "SIGNAL_SIGTERM": syscall.SIGTERM, "9": syscall.SIGKILL, "15": syscall.SIGTERM}[in.Signal]
	if in.Process.Pid == nil || sig == 0 {
		connectErr(w, http.StatusBadRequest, "invalid_argument", "want a pid and SIGNAL_SIGKILL or SIGNAL_SIGTERM")
		return
	}
	f.mu.Lock()
	found := s.running[*in.Process.Pid]
	f.mu.Unlock()
	if found == nil {
		connectErr(w, http.StatusNotFound, "not_found", fmt.Sprintf("process with pid %d not found", *in.Process.Pid))
		return
	}
	_ = found.Signal(sig)
	_ = json.NewEncoder(w).Encode(map[string]any{})
}

// Pids returns the pids of the processes running in sandbox id, for a test that kills one
// from outside.
func (f *Server) Pids(id string) []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var pids []int
	if s := f.sandboxes[id]; s != nil {
		for pid := range s.running {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

// Connect envelopes: a flags byte (0x02 ends the stream), a 4-byte big-endian length, the message.
func writeFrame(w http.ResponseWriter, flags byte, msg []byte) {
	head := []byte{flags, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(head[1:], uint32(len(msg)))
	_, _ = w.Write(append(head, msg...))
	w.(http.Flusher).Flush()
}

func readFrame(r io.Reader) (byte, []byte, error) {
	head := make([]byte, 5)
	if _, err := io.ReadFull(r, head); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > 1<<20 {
		return 0, nil, fmt.Errorf("message of %d bytes", n)
	}
	msg := make([]byte, n)
	_, err := io.ReadFull(r, msg)
	return head[0], msg, err
}

func writeEvent(w http.ResponseWriter, ev map[string]any) {
	msg, _ := json.Marshal(map[string]any{"event": ev})
	writeFrame(w, 0, msg)
}

func writeEnd(w http.ResponseWriter, err *connectError) {
	end := map[string]any{}
	if err != nil {
		end["error"] = err
	}
	msg, _ := json.Marshal(end)
	writeFrame(w, 0x02, msg)
}

// Record returns a copy of what the fake saw.
func (f *Server) Record() Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Record{Creates: append([]CreateRequest(nil), f.creates...), Kills: append([]string(nil), f.kills...),
		Expired: append([]string(nil), f.expired...), Timeouts: append([]int(nil), f.timeouts...),
		Starts: f.starts, Live: len(f.sandboxes), EnvdRequestsWithKey: f.envdKeys}
}
