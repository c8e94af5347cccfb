package contract

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
)

// SearchAttributes returns every search attribute RunCode sets, with its type, as a namespace
// must have them registered.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	m := make(map[string]enumspb.IndexedValueType)
	for _, name := range SearchAttributeNames() {
		m[name] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	return m
}

// MissingSearchAttributes lists, sorted, RunCode's search attributes that the namespace lacks or
// has with another type.
func MissingSearchAttributes(ctx context.Context, ops operatorservice.OperatorServiceClient, namespace string) ([]string, error) {
	resp, err := ops.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("contract: list search attributes of %s: %w", namespace, err)
	}
	var missing []string
	for name, typ := range SearchAttributes() {
		if resp.GetCustomAttributes()[name] != typ {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	return missing, nil
}

// RegisterSearchAttributes adds RunCode's search attributes that the namespace lacks and waits,
// until ctx ends, for the server to list them all.
func RegisterSearchAttributes(ctx context.Context, ops operatorservice.OperatorServiceClient, namespace string) error {
	missing, err := MissingSearchAttributes(ctx, ops, namespace)
	if err != nil || len(missing) == 0 {
		return err
	}
	want := SearchAttributes()
	add := make(map[string]enumspb.IndexedValueType, len(missing))
	for _, name := range missing {
		add[name] = want[name]
	}
	if _, err := ops.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: add,
	}); err != nil {
		return fmt.Errorf("contract: add search attributes %s to %s: %w", strings.Join(slices.Sorted(maps.Keys(add)), ", "), namespace, err)
	}
	for {
		missing, err = MissingSearchAttributes(ctx, ops, namespace)
		if err == nil && len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("contract: search attributes of %s not listed (missing %v, last error %v): %w", namespace, missing, err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// CreateSearchAttributesCommand is the `temporal` CLI command that registers the named search
// attributes on a namespace.
func CreateSearchAttributesCommand(namespace string, names []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "temporal operator search-attribute create --namespace %s", namespace)
	for _, n := range names {
		fmt.Fprintf(&b, " --name %s --type Keyword", n)
	}
	return b.String()
}
