package main

import (
	"context"
	"flag"
	"io"
	"os"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/internal/cli"
)

// parseCancel parses cancel ID [--reason R] [--by NAME] [--wait].
func (c *command) parseCancel(fs *flag.FlagSet, args []string) error {
	c.addConnFlags(fs)
	fs.StringVar(&c.reason, "reason", "", "why (recorded with the run)")
	fs.StringVar(&c.by, "by", os.Getenv(client.EnvReviewer), "who cancels, as the run records it (default: "+client.EnvReviewer+", else $USER@hostname)")
	fs.BoolVar(&c.wait, "wait", false, "then wait for the run to end and print its result (the output printed before the cancel)")
	pos, err := cli.Parse(fs, args, 1, 1, "reason", "by")
	if err != nil {
		return err
	}
	c.id = pos[0]
	return nil
}

// cancelCmd cancels the run as --by (else the client's default canceller) and prints what the
// run answered; with --wait, then its result.
func cancelCmd(ctx context.Context, sc *client.Client, cmd *command, stdout, _ io.Writer) error {
	if cmd.by != "" {
		sc = sc.WithCanceller(cmd.by)
	}
	out, err := sc.Cancel(ctx, cmd.id, cmd.reason)
	if err != nil {
		return err
	}
	if err := client.WriteJSON(stdout, out); err != nil || !cmd.wait {
		return err
	}
	res, err := sc.WaitResult(ctx, cmd.id, 0)
	if err != nil {
		return err
	}
	return printResult(stdout, res)
}
