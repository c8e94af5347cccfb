package httpservice

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/httpfake"
)

// The Modal recipe in examples/modal speaks the HTTP recipe's JSON. These tests pin its
// documented request and response to the shapes the recipe really sends and reads.
var modalDir = filepath.Join("..", "..", "examples", "modal")

func readStrict(t *testing.T, raw []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %T: %v", v, err)
	}
}

func modalFile(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(modalDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestModalRequestIsWhatTheRecipePosts(t *testing.T) {
	raw := modalFile(t, "request.json")
	var c guard.Checked
	readStrict(t, raw, &c)
	if got := guard.Digest(&c); got != c.Digest {
		t.Fatalf("request.json's digest is %s; its content hashes to %s", c.Digest, got)
	}
	var posted []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posted, _ = io.ReadAll(r.Body)
		_, _ = w.Write(modalFile(t, "response.json"))
	}))
	defer srv.Close()
	b, err := NewHTTP(HTTPOptions{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	_ = json.Unmarshal(raw, &want)
	if err := json.Unmarshal(posted, &got); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("the recipe posted\n%s\nwant request.json's shape and values\n%s", posted, raw)
	}
	// The documented response, as the recipe reads it.
	if !res.OK || string(res.Stdout) != "5.75\n" || len(res.Files) != 1 || res.Files[0].Name != "total.txt" || string(res.Files[0].Content) != "5.75" {
		t.Fatalf("response.json reads as %+v; want ok, 5.75 and total.txt", res)
	}
}

func TestModalRequestRunsOnTheFakeServiceAndTheRunner(t *testing.T) {
	raw := modalFile(t, "request.json")
	srv := httpfake.Start(t, nil)
	resp, err := http.Post(srv.URL, "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the fake service answered %s: %s", resp.Status, body)
	}
	var fromService guard.Result
	readStrict(t, body, &fromService)
	if string(fromService.Stdout) != "5.75\n" {
		t.Fatalf("fake service: stdout %q; want 5.75", fromService.Stdout)
	}

	// runner.py is what runs inside the Modal Sandbox; run it here on the same request.
	cmd := exec.Command("python3", filepath.Join(modalDir, "runner.py"))
	cmd.Stdin = bytes.NewReader(raw)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("runner.py: %v", err)
	}
	var fromRunner, documented guard.Result
	readStrict(t, out, &fromRunner)
	readStrict(t, modalFile(t, "response.json"), &documented)
	fromRunner.Duration, documented.Duration = 0, 0
	if !reflect.DeepEqual(fromRunner, documented) {
		t.Fatalf("runner.py answered %+v; response.json documents %+v", fromRunner, documented)
	}
	var keysRunner, keysDoc map[string]any
	_ = json.Unmarshal(out, &keysRunner)
	_ = json.Unmarshal(modalFile(t, "response.json"), &keysDoc)
	for k := range keysDoc {
		if _, ok := keysRunner[k]; !ok {
			t.Errorf("runner.py's answer has no %q", k)
		}
	}
}
