// Package devserver runs a complete Temporal server, with its Web UI, inside the
// current process. It is what `worker --dev` starts, and what integration tests
// start when they need a real Temporal server.
//
// DEVELOPMENT ONLY. The server has no authentication and no TLS, keeps
// everything in one SQLite file, and runs every Temporal service in one
// process. Anyone who can reach it can read every run's code and inputs and
// can approve runs, so Start refuses to listen on anything but a loopback
// address. Production uses a real Temporal cluster (or Temporal Cloud) and
// never imports this package.
//
// What Start puts together:
//
//   - the Temporal server (go.temporal.io/server) with the frontend, history,
//     matching and worker services, the frontend on Config.Address and the
//     other services on free loopback ports;
//   - persistence and visibility in one SQLite file, DataDir/temporal.db. The
//     schema is written only when the file is new, so runs survive a restart;
//     a lock file keeps a second dev server off the same DataDir;
//   - the namespace (Config.Namespace) and the custom search attributes
//     (Config.SearchAttributes), both registered idempotently on every start;
//   - the Temporal Web UI (github.com/temporalio/ui-server) on
//     http://Config.UIHost:Config.UIPort, optionally pointed at a codec server.
//
// Server logs go to Config.Logger (slog) at WARN and above by default, and
// are dropped once Stop begins (the server logs cancelled requests as
// errors while it shuts down).
//
// Typical use in a main:
//
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	srv, err := devserver.Start(ctx, devserver.Config{SearchAttributes: keys})
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer srv.Stop() // after the worker has stopped
//	c, err := client.Dial(client.Options{HostPort: srv.FrontendAddress(), Namespace: srv.Namespace()})
package devserver
