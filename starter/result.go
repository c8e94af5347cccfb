package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/guard/human"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// resultCmd waits for the run's result, checks its receipt and prints it: as JSON with --json
// or when stdout is no terminal (scripts keep the document they always read), else for a person
// (printResultView). With --out it first writes the files and outputs into a folder. With
// --follow it prints the output as it comes first (watchCmd).
func resultCmd(ctx context.Context, sc *client.Client, cmd *command, stdout, stderr io.Writer) error {
	var (
		res guard.Result
		err error
	)
	if cmd.follow {
		res, err = followResult(ctx, sc, cmd, stdout, stderr)
	} else {
		// WaitResult returns the result once its receipt verified against --hosts (withHosts),
		// or the hosts the run's check recorded.
		res, err = sc.WaitResult(ctx, client.Run(cmd.id), cmd.waitTimeout)
	}
	if err != nil {
		return err
	}
	var out *outWritten
	if cmd.outDir != "" {
		if out, err = writeOut(cmd.outDir, res, cmd.force); err != nil {
			return err
		}
	}
	if out != nil && !forPerson(stdout, cmd.json) {
		for _, f := range out.Files {
			fmt.Fprintf(stderr, "starter: wrote %s/%s, %s (%s)\n", terminal(out.Dir), terminal(f.Name), human.Bytes(f.Size), terminal(f.What))
		}
	}
	return printOutcome(ctx, sc, stdout, cmd, "run "+cmd.id, res, out)
}

// printOutcome prints the result of a run or cell as the one document a command prints: the
// result as JSON (printResult) with --json or when stdout is no terminal, else the summary for a
// person (printResultView), with the host whose receipt verified. result, run --wait, approve
// --wait and session cell --wait all print their result here. label names what ran ("run ID",
// "cell N of session ID"); out is what --out wrote, or nil.
func printOutcome(ctx context.Context, sc *client.Client, stdout io.Writer, cmd *command, label string, res guard.Result, out *outWritten) error {
	if !forPerson(stdout, cmd.json) {
		return printResult(stdout, res)
	}
	hosts := cmp.Or(cmd.hosts, os.Getenv("SANDBOXFLOW_HOSTS"))
	v := resultView{Label: label, Result: res, Receipt: checkReceipt(ctx, sc, hosts, cmd.id, res), Out: out}
	if strings.HasPrefix(label, "run ") {
		// Where the time went, from the run's history (one more read, for a person only).
		if rec, err := sc.Audit(ctx, cmd.id, ""); err == nil {
			v.Phases = client.PhasesText(rec.Phases)
		}
	}
	return printResultView(stdout, v)
}

// checkReceipt says which host signed res's receipt, verified against hostsFile, else the hosts
// the run's check recorded (as WaitResult verified it), or why no host can be named.
func checkReceipt(ctx context.Context, sc *client.Client, hostsFile, id string, res guard.Result) receiptCheck {
	if res.Receipt == nil {
		return receiptCheck{Unchecked: "none: the sandbox host signed none (a host without a key), so nothing vouches for this result"}
	}
	var (
		hosts   *receipt.Hosts
		against string
		err     error
	)
	if hostsFile != "" {
		hosts, err = receipt.LoadHosts(hostsFile)
		against = "the hosts file " + hostsFile
	} else {
		hosts, err = recordedHosts(ctx, sc, id)
		against = "the hosts the run's check recorded"
	}
	switch {
	case err != nil:
		return receiptCheck{Unchecked: "not checked here: " + terminal(err.Error())}
	case hosts == nil:
		return receiptCheck{Unchecked: "not checked: the run's check recorded no sandbox host key (give --hosts FILE)"}
	}
	st, err := receipt.Verify(hosts, res.Receipt)
	if err != nil {
		return receiptCheck{Unchecked: "does not verify: " + terminal(err.Error())}
	}
	return receiptCheck{Host: st.Host, Against: against}
}

// recordedHosts reads the hosts the run's check recorded from its history; nil when it recorded
// none.
func recordedHosts(ctx context.Context, sc *client.Client, id string) (*receipt.Hosts, error) {
	rec, err := sc.Audit(ctx, id, "")
	if err != nil || len(rec.HostKeys) == 0 {
		return nil, err
	}
	return receipt.HostsOf(rec.HostKeys), nil
}
