package httpservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/sandboxflow/sandboxflow/backends/kinds"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/httpcall"
)

// HTTPOptions configure HTTP, the recipe for a code-execution service of your own.
type HTTPOptions struct {
	// URL receives one POST per run. Required: an absolute http or https URL.
	URL string
	// Client sends the requests. Optional: defaults to a client without a timeout of its own (the
	// run's context, bounded by the guard's backstop, ends each call).
	Client *http.Client
	// Header is added to every request, for example an Authorization header. Optional.
	Header http.Header
	// MaxResponseBytes bounds the response body read. Optional: defaults to what the request's
	// limits allow (base64 output and files) plus 64 KiB.
	MaxResponseBytes int64
}

// HTTPName is the name of the backend NewHTTP returns, part of every digest it runs.
const HTTPName = kinds.HTTP

// HTTP returns a Func that posts each checked request to a service as JSON (guard.Checked: code,
// language, files as base64, env, limits, network) and reads its answer as JSON (guard.Result). The
// service must honour network and the timeout itself.
//
// A failure before the request was written in full (no connection, a connection lost while
// sending the body) is a retryable IntegrationError: the service cannot have run the code.
// "Written" is net/http's WroteRequest: the last bytes may still sit in the transport's buffer,
// so a connection lost on that final flush counts as sent (outcome unknown), the safe side. Anything after
// that (a status other than 200, a body that is not a result or is over the bound, a connection
// lost while waiting) is an IntegrationError whose outcome is unknown, since the service may have
// run the code, except that a run whose context passed its deadline while waiting is reported as
// a timeout (a result). Header values never appear in errors.
func HTTP(opts HTTPOptions) (Func, error) {
	u, err := httpcall.ParseURL(opts.URL)
	if err != nil {
		return nil, &guard.ConfigError{Msg: "callable http: " + err.Error()}
	}
	client := opts.Client
	if client == nil {
		client = &http.Client{}
	}
	endpoint, op := u.String(), "callable http: POST "+httpcall.RedactURL(u)
	return func(ctx context.Context, c guard.Checked) (guard.Result, error) {
		return postRun(ctx, client, endpoint, op, opts, c)
	}, nil
}

// TimeoutNote is appended to stderr when the service had not answered by the run's deadline.
const TimeoutNote = "\nsandboxflow: the service did not answer within the timeout; the request was abandoned\n"

// postRun posts one checked request to endpoint and reads the result; op names the call in
// errors, without the URL's password.
func postRun(ctx context.Context, client *http.Client, endpoint, op string, opts HTTPOptions, c guard.Checked) (guard.Result, error) {
	max := opts.MaxResponseBytes
	if max <= 0 {
		l := c.Limits
		max = (l.MaxStdoutBytes+l.MaxStderrBytes+l.MaxTotalFileBytes)*4/3 + 64<<10
	}
	ans, sent, err := httpcall.Do(ctx, client, httpcall.Request{
		Method: http.MethodPost, URL: endpoint, Header: opts.Header, JSON: c, MaxAnswer: max,
	})
	unknown := func(err error) (guard.Result, error) {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return guard.Result{TimedOut: true, ExitCode: -1, Stderr: []byte(TimeoutNote)}, nil
		}
		return guard.Result{}, &guard.IntegrationError{Op: op, Err: err, CodeMayHaveStarted: true}
	}
	switch {
	case err != nil && !sent:
		return guard.Result{}, &guard.IntegrationError{Op: op + " (not sent)", Err: err}
	case err != nil:
		return unknown(err)
	case ans.StatusCode != http.StatusOK:
		return unknown(fmt.Errorf("status %s", ans.Status))
	}
	var res guard.Result
	if err := json.Unmarshal(ans.Body, &res); err != nil {
		return unknown(fmt.Errorf("decode result: %w", err))
	}
	return res, nil
}
