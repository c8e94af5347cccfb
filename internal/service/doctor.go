package service

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/sandboxflow/sandboxflow/backends/local"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
)

// check is one line of the doctor's report.
type check struct {
	name   string
	ok     bool
	detail string
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
		}
	}

	if cfg.Role != RoleWorkflows {
		switch cfg.Backend {
		case "local":
			_, err := local.New(local.Config{AllowUnsafeLocal: cfg.AllowUnsafeLocal, UID: local.DefaultUID})
			add("backend local", err, "ready (DEVELOPMENT ONLY: nothing is isolated)")
		case backendE2B, backendHTTP:
			checks = append(checks, hostedChecks(ctx, cfg)...)
		default:
			checks = append(checks, dockerChecks(ctx, cfg)...)
		}
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
