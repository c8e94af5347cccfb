package httpservice

import (
	"context"
	"fmt"
	"regexp"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Func runs one checked request on a service. It must stop when ctx is done, honour c.Network and
// c.Limits.Timeout, and report a timeout as a result with TimedOut set.
type Func func(ctx context.Context, c guard.Checked) (guard.Result, error)

// Backend adapts a Func to guard.Backend.
type Backend struct {
	name string
	fn   Func
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,62}$`)

// New returns a backend named name (part of every digest it runs, for example "e2b") that calls fn.
// It returns a guard.ConfigError for a nil fn or a name that is not lower-case letters, digits,
// '.', '_' or '-'.
func New(name string, fn Func) (*Backend, error) {
	if fn == nil {
		return nil, &guard.ConfigError{Msg: "callable backend: the function is nil"}
	}
	if !nameRE.MatchString(name) {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("callable backend: name %q must match %s", name, nameRE)}
	}
	return &Backend{name: name, fn: fn}, nil
}

// Name returns the name given to New.
func (b *Backend) Name() string { return b.name }

// Run calls the function. An untyped error, or a panic, becomes an IntegrationError whose outcome
// is unknown.
func (b *Backend) Run(ctx context.Context, c guard.Checked) (res guard.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = guard.Result{}, &guard.IntegrationError{
				Op:                 "callable " + b.name,
				Err:                fmt.Errorf("the function panicked: %v", p),
				CodeMayHaveStarted: true,
			}
		}
	}()
	res, err = b.fn(ctx, c)
	if err != nil && guard.TypeOf(err) == "" {
		return guard.Result{}, &guard.IntegrationError{Op: "callable " + b.name, Err: err, CodeMayHaveStarted: true}
	}
	return res, err
}
