package pgtemporal

import (
	"errors"
	"fmt"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/tools/common/schema"
	sqltool "go.temporal.io/server/tools/sql"
)

// Embedded schema names (directories of go.temporal.io/server/schema) of the two stores.
const (
	HistorySchema    = "postgresql/v12/temporal"
	VisibilitySchema = "postgresql/v12/visibility"
)

// adminDatabase is the database the schema tool connects to when it creates another one.
const adminDatabase = "postgres"

// SetupSchema creates the two databases when missing, adds the schema version tables, and
// applies every versioned schema change embedded in the server module that the database lacks.
// It is idempotent: on an up-to-date database it changes nothing, and after a server upgrade it
// applies only the new versions. These are `temporal-sql-tool create`, `setup-schema -v 0.0` and
// `update-schema --schema-name ...` of the same module.
func SetupSchema(cfg Config) error {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	logger := log.NewNoopLogger()
	for _, s := range []struct{ db, name string }{
		{cfg.Database, HistorySchema},
		{cfg.VisibilityDatabase, VisibilitySchema},
	} {
		if err := setupOne(cfg, s.db, s.name, logger); err != nil {
			return fmt.Errorf("pgtemporal: schema %s in database %s: %w", s.name, s.db, err)
		}
	}
	return nil
}

func setupOne(cfg Config, database, schemaName string, logger log.Logger) error {
	if err := ensureDatabase(cfg, database, logger); err != nil {
		return err
	}
	conn, err := sqltool.NewConnection(cfg.sqlConfig(database), logger)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	if err := schema.NewSetupSchemaTask(conn, &schema.SetupConfig{InitialVersion: "0.0"}, logger).Run(); err != nil {
		return fmt.Errorf("setup-schema: %w", err)
	}
	update := &schema.UpdateConfig{DBName: database, SchemaName: schemaName}
	if err := schema.NewUpdateSchemaTask(conn, update, logger).Run(); err != nil {
		return fmt.Errorf("update-schema: %w", err)
	}
	return nil
}

// ensureDatabase creates database unless a connection to it already works.
func ensureDatabase(cfg Config, database string, logger log.Logger) error {
	probeErr := probe(cfg, database, logger)
	if probeErr == nil {
		return nil
	}
	if err := sqltool.DoCreateDatabase(cfg.sqlConfig(database), adminDatabase, logger); err != nil {
		return fmt.Errorf("create database (it did not answer: %v): %w", probeErr, err)
	}
	return nil
}

func probe(cfg Config, database string, logger log.Logger) error {
	conn, err := sqltool.NewConnection(cfg.sqlConfig(database), logger)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Exec("SELECT 1")
}

// DropDatabases drops both databases; tests use it to clean up. A database that does not exist
// is not an error.
func DropDatabases(cfg Config) error {
	cfg = cfg.WithDefaults()
	logger := log.NewNoopLogger()
	var errs []error
	for _, db := range []string{cfg.Database, cfg.VisibilityDatabase} {
		if probe(cfg, db, logger) != nil {
			continue
		}
		if err := sqltool.DoDropDatabase(cfg.sqlConfig(db), adminDatabase, logger); err != nil {
			errs = append(errs, fmt.Errorf("pgtemporal: drop database %s: %w", db, err))
		}
	}
	return errors.Join(errs...)
}
