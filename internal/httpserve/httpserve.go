// Package httpserve runs the project's HTTP servers (the codec server, the inbox, MCP over HTTP,
// metrics) one way: on a listener until a context ends, then a graceful shutdown.
package httpserve

import (
	"context"
	"net"
	"net/http"
	"time"
)

// Grace is how long open requests get to finish once the context ends; what is left is closed.
const Grace = 5 * time.Second

// Serve serves srv on ln until ctx ends, then shuts srv down (Grace). It serves TLS when
// srv.TLSConfig is set, with its certificates. It closes ln. It returns nil once ctx has ended,
// or the error that stopped the server before.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() {
		if srv.TLSConfig != nil {
			errc <- srv.ServeTLS(ln, "", "")
			return
		}
		errc <- srv.Serve(ln)
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), Grace)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		_ = srv.Close()
	}
	<-errc
	return nil
}

// Background runs Serve in a goroutine and hands report the error that stopped the server before
// ctx ended, if one does.
func Background(ctx context.Context, srv *http.Server, ln net.Listener, report func(error)) {
	go func() {
		if err := Serve(ctx, srv, ln); err != nil {
			report(err)
		}
	}()
}
