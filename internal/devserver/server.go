package devserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/temporal"
)

// ErrDataDirInUse is returned (wrapped) by Start when another dev server,
// in this process or another, holds the same DataDir.
var ErrDataDirInUse = errors.New("data dir is in use by another dev server")

// lockFileName is the lock file inside DataDir.
const lockFileName = "temporal.lock"

// Server is a running dev server. Stop it when done.
type Server struct {
	temporal  temporal.Server
	ui        *webUI
	lock      *os.File
	leveler   *stopLeveler
	frontend  string
	namespace string
	dbPath    string

	stopOnce sync.Once
	stopErr  error
}

// Start starts the Temporal server, registers the namespace and search
// attributes, starts the Web UI, and returns once all of them answer.
//
// Start takes about a second (on two shared cores: 1.5 s when it creates
// the database, 0.3 s on an existing one). The server's own start cannot be
// interrupted; readiness is then awaited for up to Config.ReadyTimeout. If
// ctx ends first, or anything fails, Start stops what it started, releases
// DataDir and returns the error (wrapping ctx's error if ctx ended).
//
// An invalid Config is reported before anything happens. A taken frontend
// or UI port is reported as a *PortInUseError, a DataDir held by another dev
// server as ErrDataDirInUse, both before anything starts. The ports are
// checked again just before each is bound; should another process take the
// UI port in the few milliseconds between, the UI server library exits the
// process.
//
// Start logs to Config.Logger at INFO only when it creates the database or
// adds search attributes.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	s, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	dataDir, err := filepath.Abs(s.DataDir)
	if err != nil {
		return nil, fmt.Errorf("devserver: data dir %s: %w", s.DataDir, err)
	}
	// The SQLite plugin puts the path into a "file:" URI unescaped.
	if strings.ContainsAny(dataDir, "?#%") {
		return nil, fmt.Errorf("devserver: invalid config: data dir %q: must not contain '?', '#' or '%%'", dataDir)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("devserver: create data dir: %w", err)
	}
	lock, err := lockDataDir(filepath.Join(dataDir, lockFileName))
	if err != nil {
		return nil, err
	}

	srv := &Server{
		lock:      lock,
		leveler:   &stopLeveler{base: s.LogLevel},
		namespace: s.Namespace,
		dbPath:    filepath.Join(dataDir, DatabaseFileName),
	}
	if err := srv.start(ctx, s); err != nil {
		return nil, errors.Join(err, srv.Stop())
	}
	return srv, nil
}

func (srv *Server) start(ctx context.Context, s settings) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("devserver: start: %w", err)
	}
	ports, err := srv.pickPorts(s)
	if err != nil {
		return err
	}
	sqlCfg := sqliteConfig(srv.dbPath)
	created, err := ensureSchema(sqlCfg)
	if err != nil {
		return err
	}
	if created {
		s.Logger.LogAttrs(ctx, slog.LevelInfo, "devserver: created database", slog.String("path", srv.dbPath))
	}
	if err := createNamespace(sqlCfg, s.Namespace, s.Retention, s.searchAttrs); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("devserver: start: %w", err)
	}
	logs := slog.New(levelHandler{min: srv.leveler, next: s.Logger.Handler()}).With("component", "temporal-devserver")
	if err := srv.startTemporal(s.frontendHost, ports, sqlCfg, logs); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, s.ReadyTimeout)
	defer cancel()
	if err := srv.awaitReady(ctx, s, logs); err != nil {
		return err
	}
	if s.UIPort > 0 {
		if err := checkFree("UI", s.UIHost, s.UIPort); err != nil {
			return err
		}
		srv.ui = startUI(s.UIHost, s.UIPort, srv.frontend, s.Namespace, s.Codec)
		if err := srv.ui.waitReady(ctx); err != nil {
			return err
		}
	}
	return nil
}

// pickPorts checks that the asked-for frontend and UI ports are free and picks free ports for the
// server's other services (and the frontend, when none was asked for).
func (srv *Server) pickPorts(s settings) (serverPorts, error) {
	host := s.frontendHost
	if s.frontendPort != 0 {
		if err := checkFree("frontend", host, s.frontendPort); err != nil {
			return serverPorts{}, err
		}
	}
	if s.UIPort > 0 {
		if err := checkFree("UI", s.UIHost, s.UIPort); err != nil {
			return serverPorts{}, err
		}
	}
	free, err := freePorts(host, 5)
	if err != nil {
		return serverPorts{}, err
	}
	ports := serverPorts{frontend: s.frontendPort, frontendHTTP: free[0], history: free[1], matching: free[2], worker: free[3]}
	if ports.frontend == 0 {
		ports.frontend = free[4]
	}
	srv.frontend = net.JoinHostPort(host, strconv.Itoa(ports.frontend))
	return ports, nil
}

// startTemporal builds and starts the server. The frontend port is checked again just before the
// server binds (building it binds the frontend's listener), to keep the window in which another
// process could take the port small.
func (srv *Server) startTemporal(host string, ports serverPorts, sqlCfg *config.SQL, logs *slog.Logger) error {
	if err := checkFree("frontend", host, ports.frontend); err != nil {
		return err
	}
	ts, err := temporal.NewServer(serverOptions(host, ports, sqlCfg, newServerLogger(logs))...)
	if err != nil {
		return fmt.Errorf("devserver: build server: %w", err)
	}
	if err := ts.Start(); err != nil {
		// Start may have started some services; Stop releases them.
		_ = ts.Stop()
		return fmt.Errorf("devserver: start server: %w", err)
	}
	srv.temporal = ts
	return nil
}

// awaitReady waits until the frontend answers and knows the namespace, then registers the search
// attributes the namespace lacks.
func (srv *Server) awaitReady(ctx context.Context, s settings, logs *slog.Logger) error {
	c, err := dialReady(ctx, client.Options{
		HostPort:  srv.frontend,
		Namespace: s.Namespace,
		Logger:    sdklog.NewStructuredLogger(logs),
	})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := waitNamespace(ctx, c, s.Namespace); err != nil {
		return err
	}
	added, err := ensureSearchAttributes(ctx, c.OperatorService(), s.Namespace, s.searchAttrs)
	if err != nil {
		return err
	}
	if len(added) > 0 {
		s.Logger.LogAttrs(ctx, slog.LevelInfo, "devserver: added search attributes",
			slog.String("namespace", s.Namespace), slog.Any("names", added))
	}
	return nil
}

// FrontendAddress is the host:port of the frontend gRPC service, for
// client.Options.HostPort.
func (srv *Server) FrontendAddress() string { return srv.frontend }

// Namespace is the namespace Start registered.
func (srv *Server) Namespace() string { return srv.namespace }

// UIURL is the Web UI's base URL, such as "http://127.0.0.1:8233", or ""
// when the UI is disabled.
func (srv *Server) UIURL() string {
	if srv.ui == nil {
		return ""
	}
	return srv.ui.url
}

// DatabasePath is the absolute path of the SQLite file holding all state.
func (srv *Server) DatabasePath() string { return srv.dbPath }

// Stop stops the UI and the server and releases the data dir. Stop workers
// and close clients first: they log errors while the server is gone. Stop
// may be called more than once; later calls return the first call's error.
func (srv *Server) Stop() error {
	srv.stopOnce.Do(func() {
		srv.leveler.stopping.Store(true)
		var errs []error
		if srv.ui != nil {
			if err := srv.ui.stop(); err != nil {
				errs = append(errs, err)
			}
		}
		if srv.temporal != nil {
			if err := srv.temporal.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("devserver: stop server: %w", err))
			}
		}
		if err := unlockDataDir(srv.lock); err != nil {
			errs = append(errs, err)
		}
		srv.stopErr = errors.Join(errs...)
	})
	return srv.stopErr
}
