package e2b

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// probeCode is run by the doctor: it prints a known line and writes a produced file.
const probeCode = `print(1)
open("probe.txt", "w").write("ok")
`

// Doctor checks that the E2B backend configured by cfg can run sandboxes: the settings, that
// E2B's API answers and accepts the key, and a probe run (print(1) and a produced file) in a real
// sandbox, killed afterwards. A check that cannot run because an earlier one failed is reported
// as failed with the reason. No line holds the key.
func Doctor(ctx context.Context, cfg Config) []guard.Check {
	var checks []guard.Check
	add := func(name string, ok bool, format string, args ...any) bool {
		detail := redact(fmt.Sprintf(format, args...), cfg.APIKey)
		checks = append(checks, guard.Check{Name: name, OK: ok, Detail: detail})
		return ok
	}
	b, err := New(cfg)
	if err != nil {
		add("e2b config", false, "%v", err)
		return checks
	}
	c := b.cfg
	add("e2b config", true, "template %s, API %s, envd %s, request timeout %s, ttl slack %s",
		c.Template, c.APIURL, c.envdBase("<id>", ""), c.RequestTimeout, c.TTLSlack)
	q := url.Values{"limit": {"1"}, "metadata": {url.Values{MetaManaged: {"true"}}.Encode()}}
	if _, err := b.api.call(ctx, http.MethodGet, "/v2/sandboxes", q, nil, nil); err != nil {
		add("e2b API reachable", false, "%v", err)
		add("e2b probe run", false, "skipped: the API did not answer")
		return checks
	}
	add("e2b API reachable", true, "%s answered and accepted the key", c.APIURL)
	checks = append(checks, b.probe(ctx))
	return checks
}

// probe runs probeCode in a sandbox and judges what comes back.
func (b *Backend) probe(ctx context.Context) guard.Check {
	const name = "e2b probe run"
	ch := guard.Probe(Name, probeCode, 2, 64)
	start := time.Now()
	res, err := b.Run(ctx, ch)
	if err != nil {
		return guard.Check{Name: name, Detail: redact(err.Error(), b.cfg.APIKey)}
	}
	got := strings.TrimSpace(string(res.Stdout))
	if res.ExitCode != 0 || res.TimedOut || got != "1" || len(res.Files) != 1 || string(res.Files[0].Content) != "ok" {
		return guard.Check{Name: name, Detail: fmt.Sprintf("probe exited %d (timed out %t), stdout %q, %d files, stderr %q",
			res.ExitCode, res.TimedOut, clipString(got, 200), len(res.Files), clipString(string(res.Stderr), 300))}
	}
	return guard.Check{Name: name, OK: true, Detail: fmt.Sprintf("template %s ran print(1) and returned a produced file in %s (network off)",
		b.cfg.Template, time.Since(start).Round(time.Millisecond))}
}
