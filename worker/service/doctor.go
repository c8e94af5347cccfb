package service

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/rules"
)

// check is one line of the doctor's report.
type check struct {
	name   string
	ok     bool
	detail string
}

// checksOf turns a backend's doctor lines into the report's.
func checksOf(cs []guard.Check) []check {
	out := make([]check, 0, len(cs))
	for _, c := range cs {
		out = append(out, check{name: c.Name, ok: c.OK, detail: c.Detail})
	}
	return out
}

// doctor runs every check, prints one PASS or FAIL line each, and reports whether any failed.
func doctor(ctx context.Context, cfg *Options, out io.Writer) (failed bool) {
	var checks []check
	add := func(name string, err error, detail string) {
		if err != nil {
			checks = append(checks, check{name, false, err.Error()})
			return
		}
		checks = append(checks, check{name, true, detail})
	}
	add("policy", cfg.Policy().Validate(), cfg.Policy().String())
	reviewers, err := checkReviewers(cfg)
	add("reviewers", err, reviewers)
	if cfg.PolicyFile != "" {
		s, err := rules.Load(cfg.PolicyFile)
		detail := ""
		if err == nil {
			detail = fmt.Sprintf("%s: %s", cfg.PolicyFile, s.Summary())
		}
		add("policy rules", err, detail)
	}

	conn := cfg.Conn.WithDefaults()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	tc, err := client.Dial(dctx, conn)
	cancel()
	if err != nil {
		add("temporal", fmt.Errorf("cannot reach Temporal at %s: %v (start it, or run `worker --dev`; set TEMPORAL_ADDRESS)", conn.Address, err), "")
	} else {
		defer tc.Close()
		add("temporal", nil, "reachable at "+conn.Address)
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := tc.WorkflowService().DescribeNamespace(qctx, &workflowservice.DescribeNamespaceRequest{Namespace: conn.Namespace})
		cancel()
		if err != nil {
			add("namespace", fmt.Errorf("namespace %s: %v", conn.Namespace, err), "")
		} else {
			add("namespace", nil, conn.Namespace)
			missing, err := contract.MissingSearchAttributes(ctx, tc.OperatorService(), conn.Namespace)
			switch {
			case err != nil:
				add("search attributes", err, "")
			case len(missing) > 0:
				add("search attributes", fmt.Errorf("missing %s; create them with: %s", strings.Join(missing, ", "),
					contract.CreateSearchAttributesCommand(conn.Namespace, missing)), "")
			default:
				add("search attributes", nil, "all present")
			}
			checks = append(checks, checkPollers(ctx, tc, cfg)...)
		}
	}

	add("sessions", nil, sessionsLine(cfg))
	if detail, ok, err := checkReceipts(cfg); ok {
		add("receipts", err, detail)
	}
	if cfg.Role != RoleWorkflows {
		how, err := cfg.sizeToHost(ctx)
		add("sandboxes", err, how)
		checks = append(checks, cfg.kind().doctor(ctx, cfg)...)
	}

	for _, c := range checks {
		status := "PASS"
		if !c.ok {
			status, failed = "FAIL", true
		}
		line := fmt.Sprintf("%s %s", status, c.name)
		if c.detail != "" {
			line += ": " + strings.ReplaceAll(c.detail, "\n", " ")
		}
		fmt.Fprintln(out, line)
	}
	return failed
}

// sessionsLine is the doctor's sessions line: whether the backend keeps a sandbox for a
// session, and the policy's session caps.
func sessionsLine(cfg *Options) string {
	if !cfg.kind().sessions {
		return fmt.Sprintf("not offered by the %s backend (it keeps no sandbox between runs; sessions run on: %s)", cfg.Backend, sessionKinds())
	}
	p := cfg.Policy()
	return fmt.Sprintf("offered by the %s backend: lifetime up to %s, idle up to %s, at most %d cells", cfg.Backend, p.MaxSessionLifetime, p.MaxSessionIdle, p.MaxSessionCells)
}
