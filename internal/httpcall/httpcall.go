// Package httpcall makes the JSON-over-HTTP calls of the backends that hand code to a service
// (backends/httpservice, E2B), and tells whether net/http wrote a request in full: the line
// between "the service never saw it" (safe to retry, or to report as not run) and "outcome
// unknown".
package httpcall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
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

// ParseURL parses s as an absolute http or https URL, the only kind of address a service is
// called at. The error quotes s with any password in it hidden.
func ParseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("URL %q must be an absolute http(s) URL", Redact(s))
	}
	return u, nil
}

// Redact returns s with its password and every query value hidden, for logs, errors and history:
// a token in a URL's query is as secret as one in its user info. A URL that does not parse is not
// shown at all.
func Redact(s string) string {
	if u, err := url.Parse(s); err == nil {
		return RedactURL(u)
	}
	return "(unparsable URL)"
}

// RedactURL is Redact for a parsed URL; u is not changed.
func RedactURL(u *url.URL) string {
	if u.RawQuery != "" || u.ForceQuery {
		q := u.Query()
		for k := range q {
			q[k] = []string{"xxxxx"}
		}
		c := *u
		c.RawQuery = q.Encode()
		u = &c
	}
	return u.Redacted()
}

// RedactError hides the query values of the URL that net/http names in err (it hides only a
// password itself), since such errors end up in logs and history. It returns err.
func RedactError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = Redact(ue.URL)
	}
	return err
}

// Request is one call.
type Request struct {
	Method, URL string
	// Header is added to the request; Accept is application/json.
	Header http.Header
	// JSON, when not nil, is encoded as the body (Content-Type application/json).
	JSON any
	// MaxAnswer caps the answer's body in bytes; a longer one is an error. Required: positive.
	MaxAnswer int64
}

// Answer is what came back.
type Answer struct {
	StatusCode int
	Status     string
	Header     http.Header
	Body       []byte
}

// Do sends r with client and reads the whole answer. sent reports whether the request was written
// in full (see Trace): when it is false, the service cannot have acted on it. Every status is an
// answer, not an error; err is about encoding, transport or reading.
func Do(ctx context.Context, client *http.Client, r Request) (a Answer, sent bool, err error) {
	var body io.Reader
	if r.JSON != nil {
		raw, err := json.Marshal(r.JSON)
		if err != nil {
			return a, false, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(raw)
	}
	var wrote atomic.Bool
	req, err := http.NewRequestWithContext(Trace(ctx, &wrote), r.Method, r.URL, body)
	if err != nil {
		return a, false, err
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Accept", "application/json")
	if r.JSON != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return a, wrote.Load(), RedactError(err)
	}
	defer resp.Body.Close()
	a = Answer{StatusCode: resp.StatusCode, Status: resp.Status, Header: resp.Header}
	a.Body, err = io.ReadAll(io.LimitReader(resp.Body, r.MaxAnswer+1))
	switch {
	case err != nil:
		return a, true, fmt.Errorf("read answer: %w", err)
	case int64(len(a.Body)) > r.MaxAnswer:
		return a, true, fmt.Errorf("read answer: over %d bytes", r.MaxAnswer)
	}
	return a, true, nil
}
