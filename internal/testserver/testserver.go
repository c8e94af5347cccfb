// Package testserver starts a real Temporal server in-process for tests (go.temporal.io/server's
// temporaltest: SQLite in memory, a fresh namespace, loopback only), with the search attributes
// of the RunCode workflow registered on its namespace.
package testserver

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/server/temporaltest"

	"github.com/sandboxflow/sandboxflow/workflows"
)

// Start starts a server that stops when t ends, registers workflows.SearchAttributeNames as
// Keyword attributes on its namespace and waits until the server lists them. It fails t if
// anything goes wrong.
func Start(t *testing.T, opts ...temporaltest.TestServerOption) *temporaltest.TestServer {
	t.Helper()
	ts := temporaltest.NewServer(append([]temporaltest.TestServerOption{temporaltest.WithT(t)}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := RegisterSearchAttributes(ctx, ts.GetDefaultClient().OperatorService(), ts.GetDefaultNamespace()); err != nil {
		t.Fatalf("testserver: %v", err)
	}
	return ts
}

// RegisterSearchAttributes adds the RunCode search attributes (all Keyword) to a namespace and
// waits, until ctx ends, for the server to list them.
func RegisterSearchAttributes(ctx context.Context, ops operatorservice.OperatorServiceClient, namespace string) error {
	attrs := make(map[string]enumspb.IndexedValueType)
	for _, name := range workflows.SearchAttributeNames() {
		attrs[name] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	if _, err := ops.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: attrs,
	}); err != nil {
		return fmt.Errorf("add search attributes to %s: %w", namespace, err)
	}
	for {
		resp, err := ops.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
		if err == nil && !slices.ContainsFunc(workflows.SearchAttributeNames(), func(n string) bool {
			return resp.GetCustomAttributes()[n] != enumspb.INDEXED_VALUE_TYPE_KEYWORD
		}) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("search attributes of %s not listed (last error %v): %w", namespace, err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
