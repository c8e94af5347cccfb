package main

import (
	"context"
	"fmt"
	"io"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// resultCmd waits for the run's result, checks its receipt and prints it; with --follow it
// prints the output as it comes first (watchCmd).
func resultCmd(ctx context.Context, sc *client.Client, cmd *command, stdout, stderr io.Writer) error {
	if cmd.follow {
		return watchCmd(ctx, sc, cmd, stdout, stderr)
	}
	res, err := sc.WaitResult(ctx, cmd.id, cmd.waitTimeout)
	if err != nil {
		return err
	}
	if err := verifyResult(ctx, sc, cmd, res); err != nil {
		return err
	}
	return printResult(stdout, res)
}

// verifyResult refuses a result whose receipt does not verify (client.VerifyResult), against
// --hosts when given.
func verifyResult(ctx context.Context, sc *client.Client, cmd *command, res guard.Result) error {
	var hosts *receipt.Hosts
	if cmd.hosts != "" {
		h, err := receipt.LoadHosts(cmd.hosts)
		if err != nil {
			return fmt.Errorf("starter result: --hosts: %w", err)
		}
		hosts = h
	}
	return sc.VerifyResult(ctx, cmd.id, res, hosts)
}
