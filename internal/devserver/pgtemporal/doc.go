// Package pgtemporal runs a Temporal server (go.temporal.io/server, the same module that
// `worker --dev` embeds) on PostgreSQL, and sets up its schema with the server module's own
// schema tooling (go.temporal.io/server/tools/sql and the schema files embedded in
// go.temporal.io/server/schema/postgresql/v12): the steps of `temporal-sql-tool create`,
// `setup-schema -v 0.0` and `update-schema --schema-name postgresql/v12/...`, done in Go.
//
// It is what the Temporal-on-PostgreSQL integration test and the temporal-postgres command
// (internal/devserver/pgtemporal/cmd/temporal-postgres) use. Unlike internal/devserver, state lives in a
// PostgreSQL cluster that any number of server processes can share, so runs survive the loss of
// a server process, and the persistence plugin is the one Temporal supports in production
// (postgres12_pgx, or postgres12 with lib/pq).
//
// The server has no authentication and no TLS: Start refuses a frontend address that is not
// loopback. A production cluster is Temporal's own deployment (its Helm chart or
// temporalio/server image, or Temporal Cloud) on the same schema; see docs/operating.md.
//
// Typical use:
//
//	cfg := pgtemporal.Config{Postgres: "127.0.0.1:5432", User: "temporal", Password: pw}
//	if err := pgtemporal.SetupSchema(cfg); err != nil { ... }
//	srv, err := pgtemporal.Start(ctx, cfg)
//	if err != nil { ... }
//	defer srv.Stop()
package pgtemporal
