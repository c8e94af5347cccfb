package pgtemporal

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/sandboxflow/sandboxflow/internal/defaults"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
)

// Defaults applied to a zero Config field.
const (
	DefaultPostgres           = "127.0.0.1:5432"
	DefaultUser               = "temporal"
	DefaultDatabase           = "temporal"
	DefaultVisibilityDatabase = "temporal_visibility"
	DefaultAddress            = "127.0.0.1:7233"
	DefaultNamespace          = "default"
	DefaultHistoryShards      = 4
	DefaultMaxConns           = 20
	DefaultRetention          = 7 * 24 * time.Hour
	DefaultReadyTimeout       = 2 * time.Minute
)

// Plugin names of the server's PostgreSQL persistence.
const (
	PluginPGX = postgresql.PluginNamePGX // "postgres12_pgx": github.com/jackc/pgx
	PluginPQ  = postgresql.PluginName    // "postgres12": github.com/lib/pq
)

// Config configures the schema set-up and the server. The zero value is a server on
// 127.0.0.1:7233 over PostgreSQL on 127.0.0.1:5432 as user "temporal" without a password.
type Config struct {
	// Postgres is the host:port of the PostgreSQL server.
	// Optional: defaults to "127.0.0.1:5432".
	Postgres string
	// User and Password log in to PostgreSQL. The user must be allowed to create databases
	// when they do not exist yet. Optional: User defaults to "temporal", Password to none.
	User, Password string
	// Plugin is the server's SQL plugin: PluginPGX or PluginPQ.
	// Optional: defaults to PluginPGX.
	Plugin string
	// Database and VisibilityDatabase hold the history and the visibility (list and search)
	// stores. Optional: default to "temporal" and "temporal_visibility".
	Database, VisibilityDatabase string
	// MaxConns caps the connections of each store, per server process.
	// Optional: defaults to 20.
	MaxConns int

	// Address is the frontend's gRPC host:port; the host must be a loopback IP.
	// Optional: defaults to "127.0.0.1:7233".
	Address string
	// Namespace is registered on start when missing, with RunCode's search attributes.
	// Optional: defaults to "default".
	Namespace string
	// Retention applies when the namespace is registered. Optional: defaults to 7 days.
	Retention time.Duration
	// HistoryShards is fixed for the life of a database: a later start must use the same
	// number. Optional: defaults to 4.
	HistoryShards int32
	// ReadyTimeout bounds how long Start waits for the frontend and the namespace.
	// Optional: defaults to 2 minutes.
	ReadyTimeout time.Duration
}

// WithDefaults returns c with every zero field set to its default (the Default* constants).
func (c Config) WithDefaults() Config {
	defaults.Zero(&c, Config{
		Postgres: DefaultPostgres, User: DefaultUser, Plugin: PluginPGX,
		Database: DefaultDatabase, VisibilityDatabase: DefaultVisibilityDatabase,
		Address: DefaultAddress, Namespace: DefaultNamespace, MaxConns: DefaultMaxConns,
		Retention: DefaultRetention, HistoryShards: DefaultHistoryShards, ReadyTimeout: DefaultReadyTimeout,
	})
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Plugin != PluginPGX && c.Plugin != PluginPQ {
		errs = append(errs, fmt.Errorf("plugin %q: want %s or %s", c.Plugin, PluginPGX, PluginPQ))
	}
	if _, _, err := net.SplitHostPort(c.Postgres); err != nil {
		errs = append(errs, fmt.Errorf("postgres address %q: %w", c.Postgres, err))
	}
	if c.Database == c.VisibilityDatabase {
		errs = append(errs, fmt.Errorf("database and visibility database are both %q; they must differ", c.Database))
	}
	host, port, err := net.SplitHostPort(c.Address)
	if err != nil {
		errs = append(errs, fmt.Errorf("address %q: %w", c.Address, err))
	} else if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		errs = append(errs, fmt.Errorf("address %q: the host must be a loopback IP (the server has no authentication)", c.Address))
	} else if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		errs = append(errs, fmt.Errorf("address %q: port out of range 1-65535", c.Address))
	}
	if c.MaxConns < 1 || c.HistoryShards < 1 || c.Retention < 0 || c.ReadyTimeout < 0 {
		errs = append(errs, errors.New("max conns and history shards must be positive, retention and ready timeout not negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pgtemporal: invalid config: %w", err)
	}
	return nil
}

// sqlConfig is the store config of one database.
func (c Config) sqlConfig(database string) *config.SQL {
	return &config.SQL{
		PluginName:      c.Plugin,
		DatabaseName:    database,
		ConnectAddr:     c.Postgres,
		ConnectProtocol: "tcp",
		User:            c.User,
		Password:        c.Password,
		MaxConns:        c.MaxConns,
		MaxIdleConns:    c.MaxConns,
		MaxConnLifetime: time.Hour,
	}
}
