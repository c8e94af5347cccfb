//go:build integration

package pgtemporal

import (
	"os"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/server/common/log"
	v12 "go.temporal.io/server/schema/postgresql/v12"
	sqltool "go.temporal.io/server/tools/sql"

	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// testPostgres is scripts/setup-postgres.sh's cluster unless SANDBOXFLOW_TEST_POSTGRES
// (host:port) and SANDBOXFLOW_TEST_POSTGRES_USER / _PASSWORD say otherwise, with databases of
// this test's own, dropped when it ends.
func testPostgres(t *testing.T) Config {
	t.Helper()
	env := func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	}
	need.Need(t, need.Postgres)
	addr := need.PostgresAddr()
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	cfg := Config{
		Postgres: addr, User: env("SANDBOXFLOW_TEST_POSTGRES_USER", "temporal"),
		Password: env("SANDBOXFLOW_TEST_POSTGRES_PASSWORD", "temporal"),
		Database: "sfschema_" + suffix, VisibilityDatabase: "sfschema_" + suffix + "_vis",
	}
	t.Cleanup(func() {
		if err := DropDatabases(cfg); err != nil {
			t.Error(err)
		}
	})
	return cfg
}

// TestSetupSchemaIsIdempotent sets up both databases from nothing, then again, and checks that
// each is at the schema version the server module ships.
func TestSetupSchemaIsIdempotent(t *testing.T) {
	cfg := testPostgres(t)
	for i := range 2 {
		if err := SetupSchema(cfg); err != nil {
			t.Fatalf("set-up %d: %v", i+1, err)
		}
	}
	for db, want := range map[string]string{cfg.Database: v12.Version, cfg.VisibilityDatabase: v12.VisibilityVersion} {
		conn, err := sqltool.NewConnection(cfg.WithDefaults().sqlConfig(db), log.NewNoopLogger())
		if err != nil {
			t.Fatal(err)
		}
		got, err := conn.ReadSchemaVersion()
		conn.Close()
		if err != nil || got != want {
			t.Errorf("database %s: schema version %q (%v); want %q", db, got, err, want)
		}
	}
}
