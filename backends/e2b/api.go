package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/httpcall"
)

// NetworkConfig is the egress part of E2B's SandboxNetworkConfig.
type NetworkConfig struct {
	// AllowOut lists allowed destinations: CIDR blocks, IP addresses or domain names
	// ("example.com", "*.example.com"). Allowed entries take precedence over denied ones.
	AllowOut []string `json:"allowOut,omitempty"`
	// DenyOut lists denied CIDR blocks or IP addresses.
	DenyOut []string `json:"denyOut,omitempty"`
}

// newSandbox is the body of POST /sandboxes (E2B's NewSandbox).
type newSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             int               `json:"timeout"`
	AutoPause           bool              `json:"autoPause"`
	Secure              bool              `json:"secure"`
	AllowInternetAccess bool              `json:"allow_internet_access"`
	Network             *NetworkConfig    `json:"network,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvVars             map[string]string `json:"envVars"`
}

// sandbox is E2B's Sandbox, the answer to POST /sandboxes.
type sandbox struct {
	TemplateID      string  `json:"templateID"`
	SandboxID       string  `json:"sandboxID"`
	ClientID        string  `json:"clientID"`
	EnvdVersion     string  `json:"envdVersion"`
	EnvdAccessToken string  `json:"envdAccessToken,omitempty"`
	Domain          *string `json:"domain,omitempty"`
}

// listedSandbox is E2B's ListedSandbox, one entry of GET /v2/sandboxes.
type listedSandbox struct {
	SandboxID string            `json:"sandboxID"`
	StartedAt time.Time         `json:"startedAt"`
	Metadata  map[string]string `json:"metadata"`
	State     string            `json:"state"`
}

// apiError is E2B's Error body.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// RateLimitError reports that E2B answered 429 Too Many Requests. It is wrapped in a retryable
// guard.IntegrationError; RetryAfter is the server's Retry-After (bounded by
// Config.MaxRetryAfter), zero when it sent none, so a caller can wait that long before the retry.
type RateLimitError struct {
	RetryAfter time.Duration
}

// RetryDelay returns RetryAfter: how long the server asked to wait before the next attempt.
// contract.ToFailure carries it to the workflow, which waits at least that long.
func (e *RateLimitError) RetryDelay() time.Duration { return e.RetryAfter }

func (e *RateLimitError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("rate limited (429), retry after %s", e.RetryAfter)
	}
	return "rate limited (429)"
}

// api speaks E2B's control-plane API.
type api struct {
	cfg Config
}

// call sends one API request with the key and decodes a 2xx answer into out. Errors are typed by
// classify; a transport failure is a retryable IntegrationError (every API call is made before
// the code could start, or after it ended).
func (a api) call(ctx context.Context, method, path string, query url.Values, in, out any) (http.Header, error) {
	op := "e2b: " + method + " " + path
	status, h, raw, err := a.do(ctx, method, path, query, in)
	if err != nil {
		return nil, err
	}
	if err := classify(op, status, h, raw, a.cfg); err != nil {
		return h, err
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return h, &guard.IntegrationError{Op: op, Err: fmt.Errorf("decode answer: %w", err)}
		}
	}
	return h, nil
}

// maxAnswerBytes caps an API answer; the largest, a page of the sandbox list, is far smaller.
const maxAnswerBytes = 8 << 20

// do sends one API request and returns the status, headers and body (at most 8 MiB), bounded by
// RequestTimeout.
func (a api) do(ctx context.Context, method, path string, query url.Values, in any) (int, http.Header, []byte, error) {
	op := "e2b: " + method + " " + path
	ctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	u := a.cfg.APIURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	ans, _, err := httpcall.Do(ctx, a.cfg.HTTPClient, httpcall.Request{
		Method: method, URL: u, Header: http.Header{"X-Api-Key": {a.cfg.APIKey}}, JSON: in, MaxAnswer: maxAnswerBytes,
	})
	if err != nil {
		return 0, nil, nil, &guard.IntegrationError{Op: op, Err: scrub(err, a.cfg.APIKey)}
	}
	return ans.StatusCode, ans.Header, ans.Body, nil
}

// classify turns an API status into an error: nil for 2xx; a ConfigError for a refused key (401,
// 403) or a request E2B will never accept (400, 404, 409, 422); a retryable IntegrationError
// wrapping RateLimitError for 429; a retryable IntegrationError for anything else (5xx). Every
// error is about a call made before the code could start; callers after that point mark it.
// The server's message is quoted with the key removed.
func classify(op string, status int, h http.Header, body []byte, cfg Config) error {
	if status >= 200 && status < 300 {
		return nil
	}
	msg := http.StatusText(status)
	var e apiError
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		msg = e.Message
	}
	msg = redact(clipString(msg, 300), cfg.APIKey)
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return &guard.ConfigError{Msg: fmt.Sprintf("%s: E2B refused the API key (status %d): %s; check %s or the key file", op, status, msg, EnvAPIKey)}
	case http.StatusBadRequest, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity:
		return &guard.ConfigError{Msg: fmt.Sprintf("%s: status %d: %s (check --e2b-template and the E2B settings)", op, status, msg)}
	case http.StatusTooManyRequests:
		return &guard.IntegrationError{Op: op, Err: &RateLimitError{RetryAfter: retryAfter(h.Get("Retry-After"), cfg.MaxRetryAfter)}}
	}
	return &guard.IntegrationError{Op: op, Err: fmt.Errorf("status %d: %s", status, msg)}
}

// retryAfter reads a Retry-After header (seconds or an HTTP date), bounded by max.
func retryAfter(v string, bound time.Duration) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if s, err := strconv.Atoi(v); err == nil {
		d = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = time.Until(t)
	}
	return min(max(d, 0), bound)
}

// create makes a sandbox.
func (a api) create(ctx context.Context, body newSandbox) (sandbox, error) {
	var s sandbox
	_, err := a.call(ctx, http.MethodPost, "/sandboxes", nil, body, &s)
	if err == nil && s.SandboxID == "" {
		err = &guard.IntegrationError{Op: "e2b: POST /sandboxes", Err: errors.New("the answer has no sandboxID")}
	}
	return s, err
}

// kill kills a sandbox; one that is already gone (404) counts as killed.
func (a api) kill(ctx context.Context, id string) error {
	path := "/sandboxes/" + url.PathEscape(id)
	status, h, raw, err := a.do(ctx, http.MethodDelete, path, nil, nil)
	if err != nil || status == http.StatusNotFound {
		return err
	}
	return classify("e2b: DELETE "+path, status, h, raw, a.cfg)
}

// list returns the running sandboxes that carry every metadata pair in meta, across pages.
func (a api) list(ctx context.Context, meta map[string]string) ([]listedSandbox, error) {
	filter := url.Values{}
	for k, v := range meta {
		filter.Set(k, v)
	}
	var all []listedSandbox
	next := ""
	for page := 0; page < 1000; page++ {
		q := url.Values{"metadata": {filter.Encode()}, "state": {"running"}, "limit": {"100"}}
		if next != "" {
			q.Set("nextToken", next)
		}
		var got []listedSandbox
		h, err := a.call(ctx, http.MethodGet, "/v2/sandboxes", q, nil, &got)
		if err != nil {
			return all, err
		}
		all = append(all, got...)
		if next = h.Get("X-Next-Token"); next == "" || len(got) == 0 {
			return all, nil
		}
	}
	return all, errors.New("e2b: list sandboxes: too many pages")
}

// redact removes secret from s.
func redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[redacted]")
}

// scrub returns err with its text redacted when it mentions secret (it never should).
func scrub(err error, secret string) error {
	if err == nil || secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return errors.New(redact(err.Error(), secret))
}

func clipString(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// errGone marks an API answer of 404 for a sandbox: E2B no longer has it (killed, or its time
// to live passed).
var errGone = errors.New("E2B reports the sandbox gone (404)")

// setTimeout makes the sandbox end ttl from now (POST /sandboxes/{id}/timeout); a sandbox
// already gone is errGone.
func (a api) setTimeout(ctx context.Context, id string, ttl time.Duration) error {
	path := "/sandboxes/" + url.PathEscape(id) + "/timeout"
	secs := max(int(math.Ceil(ttl.Seconds())), 1)
	status, h, raw, err := a.do(ctx, http.MethodPost, path, nil, map[string]int{"timeout": secs})
	if err != nil {
		return err
	}
	if status == http.StatusNotFound {
		return fmt.Errorf("e2b: POST %s: %w", path, errGone)
	}
	return classify("e2b: POST "+path, status, h, raw, a.cfg)
}

// gone asks the API whether the sandbox is gone (GET /sandboxes/{id} answers 404). Any other
// failure is not an answer: the sandbox is taken to be there.
func (a api) gone(ctx context.Context, id string) bool {
	status, _, _, err := a.do(ctx, http.MethodGet, "/sandboxes/"+url.PathEscape(id), nil, nil)
	return err == nil && status == http.StatusNotFound
}
