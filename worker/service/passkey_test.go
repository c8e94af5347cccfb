package service

import (
	"path/filepath"
	"testing"
)

// Passkey decisions count only on the inbox's origin: --passkey-origin, or with --dev the dev
// inbox's own; without either, none (they are refused). Counters default into the data folder.
func TestPasskeyOriginAndCountersDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Options
		want string
	}{
		{"dev with its inbox", Options{Dev: true, InboxPort: 8235}, "http://localhost:8235"},
		{"dev without an inbox", Options{Dev: true, InboxPort: -1}, ""},
		{"not dev", Options{InboxPort: 8235}, ""},
		{"configured", Options{Dev: true, InboxPort: 8235, PasskeyOrigin: "https://inbox.example.com"}, "https://inbox.example.com"},
	} {
		if got := passkeyOrigin(&tc.cfg); got != tc.want {
			t.Errorf("%s: passkey origin %q; want %q", tc.name, got, tc.want)
		}
	}
	if got, want := passkeyCounters(&Options{DataDir: "d"}), filepath.Join("d", "passkey-counters.json"); got != want {
		t.Errorf("counters %q; want %q", got, want)
	}
	if got := passkeyCounters(&Options{DataDir: "d", PasskeyCounters: "/var/lib/x.json"}); got != "/var/lib/x.json" {
		t.Errorf("configured counters %q; want /var/lib/x.json", got)
	}
}
