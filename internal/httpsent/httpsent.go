// Package httpsent tells whether net/http wrote a request in full, the line between "the service
// never saw it" (safe to retry or to report as not run) and "outcome unknown" for the backends
// that call a code-execution service over HTTP.
package httpsent

import (
	"context"
	"net/http/httptrace"
	"sync/atomic"
)

// Trace returns ctx with a client trace that stores in sent whether net/http wrote the request in
// full (WroteRequest). The last bytes may still sit in the transport's buffer then, so a
// connection lost on that final flush counts as sent: the safe side, since a sent request is never
// retried.
func Trace(ctx context.Context, sent *atomic.Bool) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) { sent.Store(i.Err == nil) },
	})
}
