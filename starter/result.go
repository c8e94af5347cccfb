package main

import (
	"context"
	"io"

	"github.com/sandboxflow/sandboxflow/client"
)

// resultCmd waits for the run's result, checks its receipt and prints it; with --follow it
// prints the output as it comes first (watchCmd).
func resultCmd(ctx context.Context, sc *client.Client, cmd *command, stdout, stderr io.Writer) error {
	if cmd.follow {
		return watchCmd(ctx, sc, cmd, stdout, stderr)
	}
	// WaitResult returns the result once its receipt verified against --hosts (withHosts), or
	// the hosts the run's check recorded.
	res, err := sc.WaitResult(ctx, client.Run(cmd.id), cmd.waitTimeout)
	if err != nil {
		return err
	}
	return printResult(stdout, res)
}
