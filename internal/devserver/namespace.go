package devserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// retryInterval is the pause between readiness probes in Start.
const retryInterval = 100 * time.Millisecond

// retry calls fn until it succeeds or ctx ends; the error then names what
// was awaited and fn's last error.
func retry(ctx context.Context, what string, fn func(context.Context) error) error {
	for {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devserver: %s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(retryInterval):
		}
	}
}

// dialReady connects a client once the frontend answers.
func dialReady(ctx context.Context, opts client.Options) (client.Client, error) {
	var c client.Client
	err := retry(ctx, "wait for frontend "+opts.HostPort, func(ctx context.Context) error {
		var err error
		c, err = client.DialContext(ctx, opts)
		return err
	})
	return c, err
}

// waitNamespace returns once the frontend knows the namespace.
func waitNamespace(ctx context.Context, c client.Client, namespace string) error {
	return retry(ctx, "wait for namespace "+namespace, func(ctx context.Context) error {
		_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
		return err
	})
}

// SearchAttributeTypeError reports a search attribute that exists in the
// namespace with another type than Config.SearchAttributes asks for.
type SearchAttributeTypeError struct {
	Namespace  string
	Name       string
	Have, Want enumspb.IndexedValueType
}

func (e *SearchAttributeTypeError) Error() string {
	return fmt.Sprintf("devserver: search attribute %s exists in namespace %s as %s, want %s; a search attribute's type cannot change, so use a new name or a new data dir",
		e.Name, e.Namespace, e.Have, e.Want)
}

// ensureSearchAttributes registers the wanted custom search attributes that
// the namespace lacks and reports which it added. One that exists with
// another type is an error: a search attribute's type cannot change.
func ensureSearchAttributes(ctx context.Context, op operatorservice.OperatorServiceClient, namespace string, want map[string]enumspb.IndexedValueType) ([]string, error) {
	if len(want) == 0 {
		return nil, nil
	}
	resp, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("devserver: list search attributes of %s: %w", namespace, err)
	}
	have := resp.GetCustomAttributes()
	missing := make(map[string]enumspb.IndexedValueType)
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(want)) {
		got, ok := have[name]
		switch {
		case !ok:
			missing[name] = want[name]
		case got != want[name]:
			errs = append(errs, &SearchAttributeTypeError{Namespace: namespace, Name: name, Have: got, Want: want[name]})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(missing) == 0 {
		return nil, nil
	}
	names := slices.Sorted(maps.Keys(missing))
	if _, err := op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        namespace,
		SearchAttributes: missing,
	}); err != nil {
		return nil, fmt.Errorf("devserver: add search attributes %v to %s: %w", names, namespace, err)
	}
	return names, nil
}
