//go:build integration

// Package devtest starts a real Temporal server in-process for integration tests
// (go.temporal.io/server's temporaltest: SQLite in memory, a fresh namespace, loopback only), with
// the search attributes of the RunCode workflow registered on its namespace.
package devtest

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/server/temporaltest"

	"github.com/sandboxflow/sandboxflow/contract"
)

// Start starts a server that stops when t ends, registers contract.SearchAttributes on its
// namespace and waits until the server lists them. It fails t if anything goes wrong.
func Start(t *testing.T, opts ...temporaltest.TestServerOption) *temporaltest.TestServer {
	t.Helper()
	ts := temporaltest.NewServer(append([]temporaltest.TestServerOption{temporaltest.WithT(t)}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := contract.RegisterSearchAttributes(ctx, ts.GetDefaultClient().OperatorService(), ts.GetDefaultNamespace()); err != nil {
		t.Fatalf("devtest: %v", err)
	}
	return ts
}
