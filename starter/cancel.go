package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/internal/cli"
)

// parseCancel parses cancel ID [--cell N] [--reason R] [--by NAME] [--wait].
func (c *command) parseCancel(fs *flag.FlagSet, args []string) error {
	c.addConnFlags(fs)
	fs.IntVar(&c.cell, "cell", 0, "cancel cell N of a session (the one that waits or runs)")
	fs.StringVar(&c.reason, "reason", "", "why (recorded with the run)")
	fs.StringVar(&c.by, "by", os.Getenv(client.EnvReviewer), "who cancels, as the run records it (default: "+client.EnvReviewer+", else $USER@hostname)")
	fs.BoolVar(&c.wait, "wait", false, "then wait for the run to end and print its result instead (the output printed before the cancel; one document: JSON, or a summary on a terminal)")
	fs.BoolVar(&c.json, "json", false, "with --wait: print the result as JSON even on a terminal")
	pos, err := cli.Parse(fs, args, 1, 1, "reason", "by", "cell")
	if err != nil {
		return err
	}
	c.id = pos[0]
	if c.cell < 0 {
		return &cli.UsageError{Msg: fmt.Sprintf("--cell %d: cells are numbered from 1", c.cell)}
	}
	return nil
}

// cancelCmd cancels the run, or cell --cell of the session, as --by (else the client's default
// canceller) and prints what it answered; with --wait, then its result (the output printed before
// the cancel), as `starter result` (`session cell --wait`) prints it.
func cancelCmd(ctx context.Context, sc *client.Client, cmd *command, stdout, _ io.Writer) error {
	if cmd.by != "" {
		sc = sc.WithCanceller(cmd.by)
	}
	t := cmd.target()
	out, err := sc.Cancel(ctx, t, cmd.reason)
	if err != nil {
		return err
	}
	if !cmd.wait {
		return client.WriteJSON(stdout, out)
	}
	// One document: the result, whose "cancelled" says who cancelled it and why.
	if t.IsCell() {
		return printCellOutcome(ctx, sc, cmd, t.Cell, stdout)
	}
	res, err := sc.WaitResult(ctx, t, 0)
	if err != nil {
		return err
	}
	return printOutcome(ctx, sc, stdout, cmd, "run "+cmd.id, res, nil)
}
