//go:build integration

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sandboxflow/sandboxflow/client"
)

func keyLine(t *testing.T, id string) string {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return id + ":" + base64.StdEncoding.EncodeToString(k)
}

func writeKeys(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// rawHistory returns every event of a run's history as protobuf bytes, read by a client that has
// no codec.
func rawHistory(t *testing.T, addr, workflowID string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tc, err := client.Dial(ctx, client.Connection{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	var all bytes.Buffer
	iter := tc.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		b, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	if all.Len() == 0 {
		t.Fatalf("history of %s is empty", workflowID)
	}
	return all.Bytes()
}

// TestEncryptedHistoryAndKeyRotation runs RunCode through worker --dev and the starter with a key
// file: the raw history holds neither the code, nor its output, nor an env value; the run still
// completes and decodes with the key. A run started under key A finishes after the worker restarts
// with B current and A still in the ring; with A removed it no longer decodes, with a clear error.
// The --dev codec server answers only with its token, and the Web UI is pointed at it.
func TestEncryptedHistoryAndKeyRotation(t *testing.T) {
	workerBin, starterBin := binaries(t)
	data := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	uiPort, codecPort := freePort(t), freePort(t)
	keyA, keyB := keyLine(t, "a"), keyLine(t, "b")
	ringA := writeKeys(t, keyA)
	ringBA := writeKeys(t, keyB, keyA)
	ringB := writeKeys(t, keyB)
	const token = "test-token-0123456789abcdef"
	env := []string{"TEMPORAL_ADDRESS=" + addr, "SANDBOXFLOW_TASK_QUEUE=enc",
		"SANDBOXFLOW_REVIEWER_KEY=" + filepath.Join(data, "reviewer", "id_ed25519")}
	// The token travels in the worker's environment: on its command line the code could read it.
	args := []string{"--data-dir", data, "--ui-port", strconv.Itoa(uiPort), "--backend", "local", "--allow-unsafe-local",
		"--codec-port", strconv.Itoa(codecPort)}
	w := startDevWorker(t, workerBin, append(env, "SANDBOXFLOW_KEY_FILE="+ringA, "SANDBOXFLOW_CODEC_TOKEN="+token), args...)
	sA := starterCLI{t: t, bin: starterBin, env: append(env, "SANDBOXFLOW_KEY_FILE="+ringA)}

	const secretCode = "SECRET_CODE_MARKER_7f3a"
	const secretEnv = "SECRET_ENV_VALUE_91c2"
	const secretOut = "SECRET_OUTPUT_55d0"
	code := "import os\n# " + secretCode + "\nprint('SECRET_OUTPUT_' + '55d0', len(os.environ['TOKEN']))\n"
	var st startedJSON
	sA.mustJSON(&st, "run", "--code", code, "--env", "TOKEN="+secretEnv)
	sA.mustJSON(&struct{}{}, "approve", st.WorkflowID, "--digest", st.Digest)
	var res resultJSON
	sA.mustJSON(&res, "result", st.WorkflowID)
	if !res.OK || res.Stdout != secretOut+" 21\n" {
		t.Fatalf("encrypted run: %+v", res)
	}
	raw := rawHistory(t, addr, st.WorkflowID)
	for _, secret := range []string{secretCode, secretEnv, secretOut} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("raw history holds %q in the clear", secret)
		}
	}
	// A client without the key cannot read the result.
	plain := starterCLI{t: t, bin: starterBin, env: append(env, "SANDBOXFLOW_KEY_FILE=")}
	if out, code := plain.run("result", st.WorkflowID); code == 0 {
		t.Errorf("a starter without the key read the result: %s", out)
	}

	// The --dev codec server: refused without the token, answers with it; the UI points at it.
	codecURL := "http://127.0.0.1:" + strconv.Itoa(codecPort) + "/default/decode"
	body := `{"payloads":[]}`
	resp, err := http.Post(codecURL, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("codec server without a token answered %d; want 401", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodPost, codecURL, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("codec server with the token answered %d; want 200", resp.StatusCode)
	}
	resp, err = http.Get("http://127.0.0.1:" + strconv.Itoa(uiPort) + "/api/v1/settings")
	if err != nil {
		t.Fatal(err)
	}
	settings, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var ui struct {
		Codec struct {
			Endpoint string `json:"Endpoint"`
		} `json:"Codec"`
	}
	if err := json.Unmarshal(settings, &ui); err != nil || !strings.HasPrefix(ui.Codec.Endpoint, "http://127.0.0.1:"+strconv.Itoa(codecPort)) {
		t.Errorf("the Web UI is not pointed at the codec server: settings %s", settings)
	}

	// Rotation: a run started under A waits across a restart with [B, A].
	var waiting startedJSON
	sA.mustJSON(&waiting, "run", "--code", "print('rotated')")
	w.stop(t)
	startDevWorker(t, workerBin, append(env, "SANDBOXFLOW_KEY_FILE="+ringBA, "SANDBOXFLOW_CODEC_TOKEN="+token), args...)
	sBA := starterCLI{t: t, bin: starterBin, env: append(env, "SANDBOXFLOW_KEY_FILE="+ringBA)}
	sBA.mustJSON(&struct{}{}, "approve", waiting.WorkflowID, "--digest", waiting.Digest)
	sBA.mustJSON(&res, "result", waiting.WorkflowID)
	if !res.OK || res.Stdout != "rotated\n" {
		t.Fatalf("run across the rotation: %+v", res)
	}
	// With A removed, the run's input (written under A) no longer decodes, and the error says why.
	sB := starterCLI{t: t, bin: starterBin, env: append(env, "SANDBOXFLOW_KEY_FILE="+ringB)}
	out, errText := sB.runErr("show", waiting.WorkflowID, "--env-values")
	if !strings.Contains(out+errText, `key id "a", which is not in the key ring`) {
		t.Errorf("decoding without key A: stdout %q stderr %q; want the missing key named", out, errText)
	}
}
