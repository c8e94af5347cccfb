// Command temporal-postgres runs a single-process Temporal server on PostgreSQL, after setting
// up (or upgrading) its schema with the server module's own schema tooling, and registers the
// namespace with RunCode's search attributes. It prints "temporal-postgres ready" once clients
// may connect, and stops on SIGINT or SIGTERM.
//
//	temporal-postgres --postgres 127.0.0.1:5432 --user temporal [--address 127.0.0.1:7233]
//
// The password is read from TEMPORAL_POSTGRES_PASSWORD. No authentication, loopback only: for
// tests, benchmarks and single-host set-ups; see docs/operating.md for a cluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandboxflow/sandboxflow/internal/devserver/pgtemporal"
)

func main() {
	// Each string setting of pgtemporal.Config is a flag, defaulting to the package's default.
	cfg := pgtemporal.Config{}.WithDefaults()
	for _, f := range []struct {
		value       *string
		name, usage string
	}{
		{&cfg.Postgres, "postgres", "PostgreSQL host:port"},
		{&cfg.User, "user", "PostgreSQL user (may create databases)"},
		{&cfg.Plugin, "plugin", "Temporal SQL plugin: postgres12_pgx or postgres12"},
		{&cfg.Database, "database", "history database"},
		{&cfg.VisibilityDatabase, "visibility-database", "visibility database"},
		{&cfg.Address, "address", "frontend gRPC host:port (loopback)"},
		{&cfg.Namespace, "namespace", "namespace to register"},
	} {
		flag.StringVar(f.value, f.name, *f.value, f.usage)
	}
	schemaOnly := flag.Bool("schema-only", false, "set up the schema and exit")
	flag.Parse()
	cfg.Password = os.Getenv("TEMPORAL_POSTGRES_PASSWORD")

	if err := pgtemporal.SetupSchema(cfg); err != nil {
		log.Fatalf("temporal-postgres: %v", err)
	}
	if *schemaOnly {
		fmt.Println("temporal-postgres: schema up to date")
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := pgtemporal.Start(ctx, cfg)
	if err != nil {
		stop()
		log.Fatalf("temporal-postgres: %v", err)
	}
	fmt.Println("temporal-postgres ready on " + srv.FrontendAddress())
	<-ctx.Done()
	if err := srv.Stop(); err != nil {
		log.Printf("temporal-postgres: %v", err)
	}
}
