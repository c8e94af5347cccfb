package service

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// TestDevMakesTheHostKeyOnce: worker --dev makes DATA_DIR/host/id_ed25519 once and a hosts file
// that lists it under the host's name, so that its receipts verify; without --dev and without
// files, the worker warns that results go unverified; a bad hosts file stops it.
func TestDevMakesTheHostKeyOnce(t *testing.T) {
	data := t.TempDir()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	cfg := &Options{Dev: true, DataDir: data, HostName: "devhost"}
	key, name, hosts, err := receiptFiles(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	if key != filepath.Join(data, "host", "id_ed25519") || hosts != filepath.Join(data, "host", "hosts") || name != "devhost" {
		t.Fatalf("key %s, hosts %s, name %s", key, hosts, name)
	}
	first, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := receiptFiles(cfg, logger); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(key); !bytes.Equal(first, again) {
		t.Error("a second --dev start replaced the host key")
	}
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("host key mode %v (%v); want 0600", fi.Mode(), err)
	}
	signer, err := approval.LoadSigner(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := receipt.LoadHosts(hosts)
	if err != nil {
		t.Fatal(err)
	}
	pub := signer.PublicKey()
	rec, err := receipt.Sign(signer, receipt.New(receipt.Run{WorkflowID: "w", RunID: "r", Started: time.Now(), Ended: time.Now(),
		Host: receipt.Host{Name: "devhost", PublicKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))), Fingerprint: ssh.FingerprintSHA256(pub)}}, guard.Result{}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := receipt.Verify(h, &rec); err != nil {
		t.Errorf("a receipt by the dev host key does not verify against the dev hosts file: %v", err)
	}

	logs.Reset()
	if key, _, hosts, err := receiptFiles(&Options{DataDir: t.TempDir(), HostName: "x"}, logger); err != nil || key != "" || hosts != "" {
		t.Fatalf("without --dev: %s %s %v; want no files", key, hosts, err)
	}
	if !strings.Contains(logs.String(), "no --hosts file") {
		t.Errorf("without --hosts the worker did not warn: %s", logs.String())
	}
	bad := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(bad, []byte("host-a ssh-rsa AAAA\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := receiptFiles(&Options{Hosts: bad, HostName: "x"}, logger); guard.TypeOf(err) != guard.TypeConfigError {
		t.Errorf("a bad hosts file: %v; want a ConfigError", err)
	}
}

// TestDoctorChecksTheHostKeyAgainstTheHostsFile: doctor's receipts line passes for a host key
// its hosts file lists under the host's name, and fails, saying which line to add, for one it
// does not.
func TestDoctorChecksTheHostKeyAgainstTheHostsFile(t *testing.T) {
	if _, ok, _ := checkReceipts(&Options{}); ok {
		t.Error("a worker without host key or hosts file has a receipts line")
	}
	data := t.TempDir()
	key, hosts, err := devHostKey(data, "host-a")
	if err != nil {
		t.Fatal(err)
	}
	if detail, ok, err := checkReceipts(&Options{HostKey: key, Hosts: hosts, HostName: "host-a"}); !ok || err != nil || !strings.Contains(detail, "listed in") {
		t.Errorf("a listed key: %q, %v", detail, err)
	}
	if _, _, err := checkReceipts(&Options{HostKey: key, Hosts: hosts, HostName: "host-b"}); err == nil || !strings.Contains(err.Error(), "add its line: host-b namespaces=") {
		t.Errorf("a key listed under another name: %v; want a failure naming the line to add", err)
	}
	other, _, err := devHostKey(t.TempDir(), "host-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := checkReceipts(&Options{HostKey: other, Hosts: hosts, HostName: "host-a"}); err == nil || !strings.Contains(err.Error(), "not in the hosts file") {
		t.Errorf("an unlisted key: %v; want a failure", err)
	}
}
