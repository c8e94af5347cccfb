//go:build integration

package devserver

import (
	"log/slog"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

func TestResolveDefaults(t *testing.T) {
	s, err := Config{}.resolve()
	if err != nil {
		t.Fatalf("resolve(Config{}): %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"Address", s.Address, "127.0.0.1:7233"},
		{"frontendHost", s.frontendHost, "127.0.0.1"},
		{"frontendPort", s.frontendPort, 7233},
		{"Namespace", s.Namespace, "default"},
		{"DataDir", s.DataDir, ".sandboxflow"},
		{"Retention", s.Retention, 7 * 24 * time.Hour},
		{"UIHost", s.UIHost, "127.0.0.1"},
		{"UIPort", s.UIPort, 8233},
		{"Logger", s.Logger, slog.Default()},
		{"LogLevel", s.LogLevel.Level(), slog.LevelWarn},
		{"ReadyTimeout", s.ReadyTimeout, time.Minute},
		{"searchAttrs", len(s.searchAttrs), 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v; want %v", c.name, c.got, c.want)
		}
	}
}

func TestResolve(t *testing.T) {
	keyword := temporal.NewSearchAttributeKeyKeyword
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
		check   func(t *testing.T, s settings)
	}{
		{name: "localhost maps to 127.0.0.1", cfg: Config{Address: "localhost:7300", UIHost: "localhost"},
			check: func(t *testing.T, s settings) {
				if s.frontendHost != "127.0.0.1" || s.frontendPort != 7300 || s.UIHost != "127.0.0.1" {
					t.Errorf("got frontend %s:%d, UI host %s; want 127.0.0.1:7300, 127.0.0.1", s.frontendHost, s.frontendPort, s.UIHost)
				}
			}},
		{name: "IPv6 loopback", cfg: Config{Address: "[::1]:7233", UIHost: "::1"},
			check: func(t *testing.T, s settings) {
				if s.frontendHost != "::1" || s.UIHost != "::1" {
					t.Errorf("got hosts %s, %s; want ::1, ::1", s.frontendHost, s.UIHost)
				}
			}},
		{name: "port 0 picks a free port", cfg: Config{Address: "127.0.0.1:0"},
			check: func(t *testing.T, s settings) {
				if s.frontendPort != 0 {
					t.Errorf("frontendPort: got %d; want 0", s.frontendPort)
				}
			}},
		{name: "negative UI port disables the UI", cfg: Config{UIPort: -1, UIHost: "10.0.0.1"},
			check: func(t *testing.T, s settings) {
				if s.UIPort != -1 {
					t.Errorf("UIPort: got %d; want -1", s.UIPort)
				}
			}},
		{name: "search attributes", cfg: Config{SearchAttributes: []temporal.SearchAttributeKey{
			keyword("SandboxStatus"), keyword("SandboxStatus"), temporal.NewSearchAttributeKeyInt64("Attempts")}},
			check: func(t *testing.T, s settings) {
				want := map[string]enumspb.IndexedValueType{
					"SandboxStatus": enumspb.INDEXED_VALUE_TYPE_KEYWORD,
					"Attempts":      enumspb.INDEXED_VALUE_TYPE_INT,
				}
				if len(s.searchAttrs) != len(want) {
					t.Errorf("searchAttrs: got %v; want %v", s.searchAttrs, want)
				}
				for k, v := range want {
					if s.searchAttrs[k] != v {
						t.Errorf("searchAttrs[%s]: got %v; want %v", k, s.searchAttrs[k], v)
					}
				}
			}},
		{name: "codec endpoint", cfg: Config{Codec: Codec{Endpoint: "https://codec.example/api"}}},

		{name: "any-address frontend", cfg: Config{Address: "0.0.0.0:7233"}, wantErr: true},
		{name: "private frontend", cfg: Config{Address: "10.1.2.3:7233"}, wantErr: true},
		{name: "host name frontend", cfg: Config{Address: "temporal:7233"}, wantErr: true},
		{name: "no port", cfg: Config{Address: "127.0.0.1"}, wantErr: true},
		{name: "port out of range", cfg: Config{Address: "127.0.0.1:70000"}, wantErr: true},
		{name: "UI on all interfaces", cfg: Config{UIHost: "0.0.0.0"}, wantErr: true},
		{name: "UI port out of range", cfg: Config{UIPort: 65536}, wantErr: true},
		{name: "negative retention", cfg: Config{Retention: -time.Hour}, wantErr: true},
		{name: "negative ready timeout", cfg: Config{ReadyTimeout: -time.Second}, wantErr: true},
		{name: "relative codec endpoint", cfg: Config{Codec: Codec{Endpoint: "/codec"}}, wantErr: true},
		{name: "codec endpoint scheme", cfg: Config{Codec: Codec{Endpoint: "ftp://host/codec"}}, wantErr: true},
		{name: "search attribute with two types", cfg: Config{SearchAttributes: []temporal.SearchAttributeKey{
			keyword("SandboxStatus"), temporal.NewSearchAttributeKeyString("SandboxStatus")}}, wantErr: true},
		{name: "reserved search attribute", cfg: Config{SearchAttributes: []temporal.SearchAttributeKey{keyword("WorkflowType")}}, wantErr: true},
		{name: "empty search attribute name", cfg: Config{SearchAttributes: []temporal.SearchAttributeKey{keyword("")}}, wantErr: true},
		{name: "nil search attribute", cfg: Config{SearchAttributes: []temporal.SearchAttributeKey{nil}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := tt.cfg.resolve()
			if (err != nil) != tt.wantErr {
				t.Fatalf("resolve(%+v): got error %v; want error %v", tt.cfg, err, tt.wantErr)
			}
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}
