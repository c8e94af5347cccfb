package notify_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/notify"
)

func sendOne(t *testing.T, cfg notify.EmailConfig) error {
	t.Helper()
	e, err := notify.NewEmail(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := notify.New(notify.Config{Channels: []notify.Channel{e}})
	if err != nil {
		t.Fatal(err)
	}
	return a.Send(context.Background(), contract.NotifyInput{Event: contract.EventRunAwaiting, WorkflowID: "w", RunID: "r",
		Code: "print('the code')", Deadline: time.Now().Add(time.Hour)})
}

// An SMTP server that offers no STARTTLS gets nothing: no AUTH (the credentials stay home) and no
// MAIL.
func TestEmailRefusedWithoutStartTLS(t *testing.T) {
	srv := startSMTP(t, nil, "", "")
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := sendOne(t, notify.EmailConfig{Addr: srv.Addr, From: "sf@example.com", To: []string{"r@example.com"}, Username: "sf", PasswordFile: pw})
	if !errors.Is(err, notify.ErrNoStartTLS) {
		t.Fatalf("Send = %v; want ErrNoStartTLS", err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.commands) != 0 || len(srv.mails) != 0 {
		t.Errorf("the server saw %v and %d mails; want nothing", srv.commands, len(srv.mails))
	}
}

// A server whose certificate the CA file does not vouch for gets nothing either.
func TestEmailRefusesUnverifiedServer(t *testing.T) {
	cert, _ := selfSigned(t)
	_, otherCA := selfSigned(t)
	srv := startSMTP(t, &cert, "", "")
	err := sendOne(t, notify.EmailConfig{Addr: srv.Addr, From: "sf@example.com", To: []string{"r@example.com"}, CAFile: otherCA})
	if err == nil || !strings.Contains(err.Error(), "STARTTLS") {
		t.Fatalf("Send = %v; want a STARTTLS verification failure", err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if slices.Contains(srv.commands, "MAIL") {
		t.Errorf("the server got MAIL from a client that could not verify it")
	}
}
