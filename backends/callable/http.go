package callable

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"

	"github.com/sandboxflow/sandboxflow/guard"
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

// HTTP returns a Func that posts each checked request to a service as JSON (guard.Checked: code,
// language, files as base64, env, limits, network) and reads its answer as JSON (guard.Result). The
// service must honour network and the timeout itself.
//
// A connection that could not be made is a retryable IntegrationError (the request never left);
// anything after the request was sent (a status other than 200, a body that is not a result, or one
// over the bound) is an IntegrationError whose outcome is unknown, since the service may have run
// the code.
func HTTP(opts HTTPOptions) (Func, error) {
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("callable http: URL %q must be an absolute http(s) URL", opts.URL)}
	}
	client := opts.Client
	if client == nil {
		client = &http.Client{}
	}
	return func(ctx context.Context, c guard.Checked) (guard.Result, error) {
		body, err := json.Marshal(c)
		if err != nil {
			return guard.Result{}, &guard.IntegrationError{Op: "callable http: encode request", Err: err}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
		if err != nil {
			return guard.Result{}, &guard.IntegrationError{Op: "callable http: build request", Err: err}
		}
		for k, vs := range opts.Header {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			var op *net.OpError
			notSent := errors.As(err, &op) && op.Op == "dial"
			return guard.Result{}, &guard.IntegrationError{Op: "callable http: POST " + u.Redacted(), Err: err, CodeMayHaveStarted: !notSent}
		}
		defer resp.Body.Close()
		max := opts.MaxResponseBytes
		if max <= 0 {
			l := c.Limits
			max = (l.MaxStdoutBytes+l.MaxStderrBytes+l.MaxTotalFileBytes)*4/3 + 64<<10
		}
		raw, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
		switch {
		case err != nil:
			return guard.Result{}, &guard.IntegrationError{Op: "callable http: read response", Err: err, CodeMayHaveStarted: true}
		case int64(len(raw)) > max:
			return guard.Result{}, &guard.IntegrationError{Op: "callable http: read response", Err: fmt.Errorf("response is over %d bytes", max), CodeMayHaveStarted: true}
		case resp.StatusCode != http.StatusOK:
			return guard.Result{}, &guard.IntegrationError{Op: "callable http: POST " + u.Redacted(), Err: fmt.Errorf("status %s", resp.Status), CodeMayHaveStarted: true}
		}
		var res guard.Result
		if err := json.Unmarshal(raw, &res); err != nil {
			return guard.Result{}, &guard.IntegrationError{Op: "callable http: decode result", Err: err, CodeMayHaveStarted: true}
		}
		return res, nil
	}, nil
}
