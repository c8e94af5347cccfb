package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/internal/cli"
)

// defaultPageSize and maxPageSize bound `starter pending --page-size`.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// parsePending parses pending [--json] [--page-size N] [--next-page TOKEN].
func (c *command) parsePending(fs *flag.FlagSet, args []string) error {
	c.addConnFlags(fs)
	fs.BoolVar(&c.json, "json", false, "print JSON for programs instead of a table")
	fs.IntVar(&c.pageSize, "page-size", defaultPageSize, "runs listed at most; the rest are on the next page")
	fs.StringVar(&c.nextPage, "next-page", "", "list the page after the one whose next_page_token (or table footer) gave TOKEN")
	if _, err := cli.Parse(fs, args, 0, 0, "next-page"); err != nil {
		return err
	}
	if c.pageSize < 1 || c.pageSize > maxPageSize {
		return &cli.UsageError{Msg: fmt.Sprintf("--page-size %d: want 1 to %d", c.pageSize, maxPageSize)}
	}
	return nil
}

// pendingCmd lists one page of the runs that wait for a decision: a table, or JSON with --json.
func pendingCmd(ctx context.Context, sc *client.Client, cmd *command, stdout, _ io.Writer) error {
	page, err := sc.PendingPage(ctx, cmd.pageSize, cmd.nextPage)
	if page.Runs == nil {
		page.Runs = []client.Pending{}
	}
	if err != nil || cmd.json {
		return printOr(stdout, page, err)
	}
	// The table reads each row's status too (agent, code, deadline); --json keeps the list's own
	// rows, one visibility call, for programs that poll.
	return printPending(stdout, page, pendingDetails(ctx, sc, page.Runs), cmd.pageSize, time.Now())
}
