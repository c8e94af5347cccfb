package pgtemporal

import (
	"strings"
	"testing"
)

func TestConfigDefaultsAndValidation(t *testing.T) {
	def := Config{}.WithDefaults()
	if err := def.validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	if def.Plugin != PluginPGX || def.Database != "temporal" || def.VisibilityDatabase != "temporal_visibility" || def.HistoryShards != 4 {
		t.Fatalf("defaults: got %+v", def)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"public frontend", Config{Address: "0.0.0.0:7233"}, "loopback"},
		{"unknown plugin", Config{Plugin: "mysql8"}, "plugin"},
		{"same databases", Config{Database: "t", VisibilityDatabase: "t"}, "must differ"},
		{"bad postgres address", Config{Postgres: "localhost"}, "postgres address"},
		{"port zero", Config{Address: "127.0.0.1:0"}, "port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.WithDefaults().validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want an error about %q", err, tc.want)
			}
		})
	}
}

func TestSQLConfigUsesBothStores(t *testing.T) {
	cfg := Config{Postgres: "127.0.0.1:5433", User: "u", Password: "p"}.WithDefaults()
	h, v := cfg.sqlConfig(cfg.Database), cfg.sqlConfig(cfg.VisibilityDatabase)
	if h.DatabaseName != "temporal" || v.DatabaseName != "temporal_visibility" || h.ConnectAddr != "127.0.0.1:5433" ||
		h.PluginName != PluginPGX || h.ConnectProtocol != "tcp" || h.User != "u" || h.Password != "p" || h.MaxConns != DefaultMaxConns {
		t.Fatalf("got %+v and %+v", h, v)
	}
}
