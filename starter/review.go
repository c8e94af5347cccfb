package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
)

// reviewCmd runs the reviewer's commands: statement prints the bytes to sign; approve and deny
// sign a decision with the reviewer's key and send it.
func reviewCmd(ctx context.Context, cmd string, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	cf := addConnFlags(fs)
	var (
		deny       = fs.Bool("deny", false, "statement: deny instead of approve")
		approvalID = fs.String("approval-id", "", "statement: the decision's UUID (default: a new one)")
		expires    = fs.Duration("expires-in", 0, "statement: how long the signature counts (default 1h, at most until the approval deadline)")
		digest     = fs.String("digest", "", "approve: the digest you read (required)")
		key        = fs.String("key", "", "your reviewer key: an OpenSSH private key, or a .pub whose key is in ssh-agent ["+client.EnvReviewerKey+"]")
		reason     = fs.String("reason", "", "why (deny: required)")
	)
	id, err := parseWithID(fs, args)
	if err != nil {
		return 2, err
	}
	switch {
	case cmd == "approve" && *digest == "":
		return 2, errors.New("--digest is required: approve the digest you read with `starter show`")
	case cmd == "deny" && *reason == "":
		return 2, errors.New("--reason is required")
	}
	tc, sc, err := cf.dial(ctx)
	if err != nil {
		return 1, err
	}
	defer tc.Close()
	if cmd == "statement" {
		opts := client.StatementOptions{Deny: *deny, ApprovalID: *approvalID}
		if *expires > 0 {
			opts.Expires = time.Now().Add(*expires)
		}
		f, err := sc.Statement(ctx, id, opts)
		if err != nil {
			return 1, err
		}
		stmt, err := f.Statement()
		if err != nil {
			return 1, err
		}
		_, err = stdout.Write(stmt)
		return 0, err
	}
	signer, closer, err := client.LoadReviewerKey(*key)
	if err != nil {
		return 2, err
	}
	defer closer.Close()
	var res any
	if cmd == "approve" {
		res, err = sc.Approve(ctx, id, *digest, signer, *reason)
	} else {
		res, err = sc.Deny(ctx, id, signer, *reason)
	}
	if err != nil {
		return 1, fmt.Errorf("%s %s: %w", cmd, id, err)
	}
	return 0, json.NewEncoder(stdout).Encode(res)
}
