// Package httpfake is a code-execution service of one's own, for tests of the HTTP recipe
// (backends/httpservice, `worker --backend http`): it reads one guard.Checked as JSON per POST
// (unknown fields refused, so shape drift shows), runs the code with the local python3 or sh in a
// temporary folder with the input files and env, and answers one guard.Result with output, exit
// code, a timeout as a result, and the files the code wrote. It listens on loopback only.
// It is for tests only: it runs whatever code it is sent as the test's user, with no isolation.
package httpfake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Server is a running fake service.
type Server struct {
	// URL is where to POST.
	URL  string
	runs atomic.Int32
	seen atomic.Pointer[guard.Checked]
}

// Start starts the service; it stops when t ends. Every request must carry each of header's
// names with its value (401 otherwise), as a service behind a token would.
func Start(t testing.TB, header http.Header) *Server {
	t.Helper()
	s := &Server{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k := range header {
			if r.Header.Get(k) != header.Get(k) {
				http.Error(w, "missing or wrong "+k, http.StatusUnauthorized)
				return
			}
		}
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "POST application/json only", http.StatusMethodNotAllowed)
			return
		}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		var c guard.Checked
		if err := dec.Decode(&c); err != nil {
			http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
			return
		}
		s.runs.Add(1)
		s.seen.Store(&c)
		dir, err := os.MkdirTemp("", "httpfake-")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer os.RemoveAll(dir)
		res, err := Run(r.Context(), dir, c)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Runs counts the requests that reached the code-running part: how many times code ran.
func (s *Server) Runs() int { return int(s.runs.Load()) }

// Last returns the last request the service read, or nil.
func (s *Server) Last() *guard.Checked { return s.seen.Load() }

// Run runs c in dir with the local interpreters and returns its result, the way the fake
// service answers. It does not cap output: the guard around the recipe does.
func Run(ctx context.Context, dir string, c guard.Checked) (guard.Result, error) {
	inputs := map[string][]byte{}
	for _, f := range c.Files {
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return guard.Result{}, err
		}
		if err := os.WriteFile(p, f.Content, 0o644); err != nil {
			return guard.Result{}, err
		}
		inputs[f.Name] = f.Content
	}
	argv := map[string][]string{guard.Python: {"python3", "-u", "-c", c.Code}, guard.Shell: {"/bin/sh", "-c", c.Code}}[c.Language]
	if argv == nil {
		return guard.Result{}, errors.New("httpfake: language " + c.Language + " is not offered")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir}
	for _, e := range c.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return guard.Result{}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timedOut := false
	select {
	case <-done:
	case <-time.After(c.Limits.Timeout):
		timedOut = true
	case <-ctx.Done():
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if timedOut || ctx.Err() != nil {
		<-done
	}
	res := guard.Result{ExitCode: cmd.ProcessState.ExitCode(), Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	if timedOut {
		res.TimedOut, res.ExitCode = true, -1
		return res, nil
	}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		if in, ok := inputs[filepath.ToSlash(rel)]; err != nil || (ok && bytes.Equal(in, data)) {
			return err
		}
		res.Files = append(res.Files, guard.File{Name: filepath.ToSlash(rel), Size: int64(len(data)), Content: data})
		return nil
	})
	return res, err
}
