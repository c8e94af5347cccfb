package e2b

import (
	"bufio"
	"encoding/base64"
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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeE2B is E2B as its published OpenAPI spec (spec/openapi.yml) and envd protocol
// (spec/envd/envd.yaml, process.proto, filesystem.proto in e2b-dev/E2B) describe it: an API
// server (X-API-Key; POST /sandboxes answers 201 with a Sandbox; GET /v2/sandboxes filters by a
// metadata query; DELETE /sandboxes/{id} answers 204 or 404; errors are {code, message}) and an
// envd server (routed by E2b-Sandbox-Id, guarded by X-Access-Token for secure sandboxes; POST and
// GET /files; Connect unary ListDir and MakeDir; Connect server-streaming Process/Start with
// envelope framing, start/data/end events and an end-of-stream message, killing the process
// at Connect-Timeout-Ms). Each sandbox is a temporary folder that stands for its root, and its
// processes are real local python3 and sh processes, so results are real.
type fakeE2B struct {
	t    *testing.T
	key  string
	api  *httptest.Server
	envd *httptest.Server

	mu        sync.Mutex
	sandboxes map[string]*fakeSandbox
	creates   []newSandbox
	kills     []string
	starts    int
	envdKeys  int // envd requests that carried the API key: must stay 0

	// Failure modes.
	rateLimit   int    // answer 429 to this many creates
	retryAfter  string // the Retry-After of a 429
	createDelay time.Duration
	cutStream   bool // cut the process stream after the first output
	failKill    bool // answer 500 to DELETE
}

type fakeSandbox struct {
	id, token string
	root      string
	meta      map[string]string
	started   time.Time
	procs     []*exec.Cmd
}

func newFakeE2B(t *testing.T, key string) *fakeE2B {
	t.Helper()
	f := &fakeE2B{t: t, key: key, sandboxes: map[string]*fakeSandbox{}}
	api := http.NewServeMux()
	api.HandleFunc("POST /sandboxes", f.create)
	api.HandleFunc("GET /v2/sandboxes", f.list)
	api.HandleFunc("DELETE /sandboxes/{id}", f.kill)
	f.api = httptest.NewServer(f.auth(api))
	envd := http.NewServeMux()
	envd.HandleFunc("POST /files", f.sandbox(f.upload))
	envd.HandleFunc("GET /files", f.sandbox(f.download))
	envd.HandleFunc("POST /filesystem.Filesystem/ListDir", f.sandbox(f.listDir))
	envd.HandleFunc("POST /filesystem.Filesystem/MakeDir", f.sandbox(f.makeDir))
	envd.HandleFunc("POST /process.Process/Start", f.sandbox(f.start))
	f.envd = httptest.NewServer(envd)
	t.Cleanup(func() {
		f.api.Close()
		f.envd.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, s := range f.sandboxes {
			s.killAll()
		}
	})
	return f
}

// config is a backend config that talks to the fake.
func (f *fakeE2B) config() Config {
	return Config{APIKey: f.key, APIURL: f.api.URL, SandboxURL: f.envd.URL, RequestTimeout: 5 * time.Second}
}

func apiErr(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(apiError{Code: code, Message: msg})
}

func (f *fakeE2B) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("X-API-Key"); got != f.key {
			// A hostile echo of what it was sent, to prove the client redacts it.
			apiErr(w, http.StatusUnauthorized, "Invalid API key "+strconv.Quote(got))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (f *fakeE2B) create(w http.ResponseWriter, r *http.Request) {
	var body newSandbox
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.TemplateID == "" {
		apiErr(w, http.StatusBadRequest, "bad body")
		return
	}
	f.mu.Lock()
	f.creates = append(f.creates, body)
	limited := f.rateLimit > 0
	if limited {
		f.rateLimit--
	}
	delay, after := f.createDelay, f.retryAfter
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
		root: root, meta: body.Metadata, started: time.Now()}
	_ = os.MkdirAll(filepath.Join(root, "home/user"), 0o755)
	f.mu.Lock()
	f.sandboxes[s.id] = s
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"templateID": body.TemplateID, "sandboxID": s.id, "clientID": "6532622b",
		"envdVersion": "0.2.0", "envdAccessToken": s.token, "domain": nil})
}

func (f *fakeE2B) list(w http.ResponseWriter, r *http.Request) {
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
			out = append(out, map[string]any{"templateID": "base", "sandboxID": s.id, "clientID": "6532622b",
				"startedAt": s.started.UTC().Format(time.RFC3339Nano), "endAt": s.started.Add(time.Hour).UTC().Format(time.RFC3339Nano),
				"cpuCount": 2, "memoryMB": 512, "diskSizeMB": 1024, "metadata": s.meta, "state": "running", "envdVersion": "0.2.0"})
		}
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (f *fakeE2B) kill(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failKill {
		apiErr(w, http.StatusInternalServerError, "kill failed")
		return
	}
	s, ok := f.sandboxes[id]
	if !ok {
		apiErr(w, http.StatusNotFound, "sandbox "+id+" not found")
		return
	}
	f.kills = append(f.kills, id)
	s.killAll()
	delete(f.sandboxes, id)
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
func (f *fakeE2B) sandbox(h func(http.ResponseWriter, *http.Request, *fakeSandbox)) http.HandlerFunc {
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

func (f *fakeE2B) upload(w http.ResponseWriter, r *http.Request, s *fakeSandbox) {
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

func (f *fakeE2B) download(w http.ResponseWriter, r *http.Request, s *fakeSandbox) {
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
	if err := json.NewDecoder(r.Body).Decode(in); err != nil {
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

func (f *fakeE2B) makeDir(w http.ResponseWriter, r *http.Request, s *fakeSandbox) {
	var in struct {
		Path string `json:"path"`
	}
	if !unary(w, r, &in) {
		return
	}
	p, ok := s.host(in.Path)
	if !ok {
		connectErr(w, http.StatusBadRequest, "invalid_argument", "bad path")
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

func (f *fakeE2B) listDir(w http.ResponseWriter, r *http.Request, s *fakeSandbox) {
	var in struct {
		Path  string `json:"path"`
		Depth int    `json:"depth"`
	}
	if !unary(w, r, &in) {
		return
	}
	p, ok := s.host(in.Path)
	if !ok {
		connectErr(w, http.StatusBadRequest, "invalid_argument", "bad path")
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
			"size": strconv.FormatInt(info.Size(), 10), "permissions": info.Mode().String(), "owner": "user", "group": "user"})
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

func (f *fakeE2B) start(w http.ResponseWriter, r *http.Request, s *fakeSandbox) {
	if r.Header.Get("Content-Type") != contentTypeConnectJSON || r.Header.Get("Connect-Protocol-Version") != "1" {
		http.Error(w, "unsupported media type", http.StatusUnsupportedMediaType)
		return
	}
	var in startRequest
	flags, msg, err := readEnvelope(r.Body)
	if err == nil && flags != 0 {
		err = fmt.Errorf("flags %d", flags)
	}
	if err == nil {
		err = json.Unmarshal(msg, &in)
	}
	w.Header().Set("Content-Type", contentTypeConnectJSON)
	if err != nil {
		writeEnd(w, &connectError{Code: "invalid_argument", Message: err.Error()})
		return
	}
	timeoutMs, _ := strconv.Atoi(r.Header.Get("Connect-Timeout-Ms"))
	cmd, err := s.command(in.Process)
	if err == nil {
		err = f.run(w, s, cmd, time.Duration(timeoutMs)*time.Millisecond)
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
		if strings.HasPrefix(a, "/") {
			a, _ = s.host(a)
		}
		args = append(args, a)
	}
	cmd := exec.Command(interp, args...)
	cmd.Dir, _ = s.host(pc.Cwd)
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
func (f *fakeE2B) run(w http.ResponseWriter, s *fakeSandbox, cmd *exec.Cmd, timeout time.Duration) error {
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		return err
	}
	f.mu.Lock()
	s.procs = append(s.procs, cmd)
	f.starts++
	cut := f.cutStream
	f.mu.Unlock()
	if timeout > 0 {
		timer := time.AfterFunc(timeout, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		defer timer.Stop()
	}
	events := make(chan map[string]any)
	quit := make(chan struct{})
	defer close(quit)
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
	writeEvent(w, map[string]any{"start": map[string]any{"pid": cmd.Process.Pid}})
	for ev := range events {
		writeEvent(w, ev)
		if cut {
			panic(http.ErrAbortHandler) // the connection drops mid-run
		}
	}
	_ = cmd.Wait()
	st := cmd.ProcessState
	end := map[string]any{"exited": st.Exited(), "status": st.String()}
	if code := st.ExitCode(); code != 0 {
		end["exitCode"] = code // proto JSON leaves zero values out
	}
	writeEvent(w, map[string]any{"end": end})
	writeEnd(w, nil)
	return nil
}

func writeEvent(w http.ResponseWriter, ev map[string]any) {
	msg, _ := json.Marshal(map[string]any{"event": ev})
	_, _ = w.Write(envelope(0, msg))
	w.(http.Flusher).Flush()
}

func writeEnd(w http.ResponseWriter, err *connectError) {
	msg, _ := json.Marshal(endStream{Error: err})
	_, _ = w.Write(envelope(flagEndStream, msg))
	w.(http.Flusher).Flush()
}

// set changes the fake's failure modes while requests may be in flight.
func (f *fakeE2B) set(change func(f *fakeE2B)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

// snapshot returns copies of what the fake recorded.
func (f *fakeE2B) snapshot() (creates []newSandbox, kills []string, starts, live, envdKeys int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]newSandbox(nil), f.creates...), append([]string(nil), f.kills...), f.starts, len(f.sandboxes), f.envdKeys
}
