package httpservice

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/httpcall"
	"github.com/sandboxflow/sandboxflow/internal/smallfile"
)

// NewHTTP returns the HTTP recipe as a backend named "http" (HTTPName): what
// `worker --backend http --http-url URL [--http-header-file F]` runs.
func NewHTTP(opts HTTPOptions) (*Backend, error) {
	fn, err := HTTP(opts)
	if err != nil {
		return nil, err
	}
	return New(HTTPName, fn)
}

// headerNameRE is an HTTP header name (RFC 9110 token).
var headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// maxHeaderFileBytes caps the header file: a wrong path (a log, a device) is refused, not read.
const maxHeaderFileBytes = 1 << 20

// LoadHeaderFile reads HTTP headers from a file of "Name: value" lines, for example
// "Authorization: Bearer ..." for the HTTP recipe. Blank lines and lines starting with '#' are
// skipped. Errors name the file and the line number, never a value: the file holds secrets.
func LoadHeaderFile(path string) (http.Header, error) {
	raw, err := smallfile.Read(path, maxHeaderFileBytes)
	if err != nil {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("callable http: read header file %s: %v", path, err)}
	}
	h := http.Header{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		switch {
		case !ok || !headerNameRE.MatchString(name):
			return nil, &guard.ConfigError{Msg: fmt.Sprintf("callable http: header file %s line %d: want \"Name: value\"", path, n)}
		case strings.ContainsFunc(value, func(r rune) bool { return (r < 0x20 && r != '\t') || r == 0x7f }):
			return nil, &guard.ConfigError{Msg: fmt.Sprintf("callable http: header file %s line %d: the value of %s holds control characters", path, n, name)}
		case http.CanonicalHeaderKey(name) == "Content-Type" || http.CanonicalHeaderKey(name) == "Host":
			return nil, &guard.ConfigError{Msg: fmt.Sprintf("callable http: header file %s line %d: %s is set by the recipe", path, n, name)}
		}
		h.Add(name, value)
	}
	if err := sc.Err(); err != nil {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("callable http: read header file %s: %v", path, err)}
	}
	return h, nil
}

// HTTPDoctor checks the HTTP recipe configured by opts: the settings, that the service answers
// at all (any HTTP status to a GET counts), and a probe run of print(1) that must come back with
// exit code 0 and "1" on stdout. Details name header names, never values.
func HTTPDoctor(ctx context.Context, opts HTTPOptions) []guard.Check {
	var checks []guard.Check
	add := func(name string, ok bool, format string, args ...any) {
		checks = append(checks, guard.Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}
	b, err := NewHTTP(opts)
	if err != nil {
		add("http config", false, "%v", err)
		return checks
	}
	names := make([]string, 0, len(opts.Header))
	for k := range opts.Header {
		names = append(names, k)
	}
	add("http config", true, "POST %s, headers: %s", httpcall.Redact(opts.URL), strings.Join(names, ", "))
	client := opts.Client
	if client == nil {
		client = &http.Client{}
	}
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(gctx, http.MethodGet, opts.URL, nil)
	if err == nil {
		var resp *http.Response
		if resp, err = client.Do(req); err != nil {
			err = httpcall.RedactError(err)
		} else {
			resp.Body.Close()
			add("http service reachable", true, "GET answered %s", resp.Status)
		}
	}
	if err != nil {
		add("http service reachable", false, "%v", err)
		add("http probe run", false, "skipped: the service is not reachable")
		return checks
	}
	checks = append(checks, probeHTTP(ctx, b))
	return checks
}

// probeHTTP runs print(1) through the recipe.
func probeHTTP(ctx context.Context, b *Backend) guard.Check {
	const name = "http probe run"
	c := guard.Checked{
		Language: guard.Python,
		Code:     "print(1)\n",
		CheckedSettings: guard.CheckedSettings{
			Backend: HTTPName,
			Limits: guard.Limits{Timeout: 20 * time.Second, MaxStdoutBytes: 4096, MaxStderrBytes: 4096,
				MaxFiles: 1, MaxFileBytes: 1, MaxTotalFileBytes: 1},
		},
		Owner: guard.Owner{WorkflowID: "doctor"},
	}
	c.Digest = guard.Digest(&c)
	pctx, cancel := context.WithTimeout(ctx, c.Limits.Timeout+5*time.Second)
	defer cancel()
	start := time.Now()
	res, err := b.Run(pctx, c)
	switch {
	case err != nil:
		return guard.Check{Name: name, Detail: err.Error()}
	case res.TimedOut || res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "1":
		return guard.Check{Name: name, Detail: fmt.Sprintf("probe exited %d (timed out %t), stdout %q, stderr %q",
			res.ExitCode, res.TimedOut, clip(res.Stdout), clip(res.Stderr))}
	}
	return guard.Check{Name: name, OK: true, Detail: fmt.Sprintf("print(1) answered in %s", time.Since(start).Round(time.Millisecond))}
}

func clip(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}
