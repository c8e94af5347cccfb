//go:build integration

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
)

func TestConfigNotifyFlags(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("not a secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--notify-webhook", "http://127.0.0.1:9/hook"}, // no secret
		{"--notify-webhook", "http://127.0.0.1:9/hook", "--notify-webhook-secret-file", bad},
		{"--notify-smtp", "mail.example.com:587", "--notify-smtp-from", "sf@example.com"}, // no recipient
		{"--notify-smtp", "mail.example.com", "--notify-smtp-from", "sf@example.com", "--notify-smtp-to", "r@example.com"},
		{"--notify-smtp", "mail.example.com:587", "--notify-smtp-from", "sf@example.com", "--notify-smtp-to", "r@example.com\r\nBcc: x@evil.example"},
		{"--notify-smtp", "mail.example.com:587", "--notify-smtp-from", "sf@example.com", "--notify-smtp-to", "r@example.com", "--notify-smtp-username", "u"},
		{"--notify-inbox-url", "javascript:alert(1)"},
	} {
		if _, _, err := parseConfig("test", args); guard.TypeOf(err) != guard.TypeConfigError {
			t.Errorf("parseConfig(%q) = %v; want a ConfigError", args, err)
		}
	}
	t.Setenv("SANDBOXFLOW_NOTIFY_SLACK", "https://hooks.example.com/T/B/x")
	cfg, _, err := parseConfig("test", []string{"--notify-webhook", "http://127.0.0.1:9/hook", "--notify-webhook-secret-file", secret,
		"--notify-smtp", "mail.example.com:587", "--notify-smtp-from", "sf@example.com", "--notify-smtp-to", "a@example.com, b@example.com",
		"--notify-inbox-url", "https://inbox.example.com", "--notify-include-code"})
	if err != nil {
		t.Fatal(err)
	}
	if n := cfg.Notify; n.SlackURL != "https://hooks.example.com/T/B/x" || n.WebhookSecretFile != secret || !n.IncludeCode || n.SMTPTo != "a@example.com, b@example.com" {
		t.Errorf("notify options %+v", n)
	}
}
