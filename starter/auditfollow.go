package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
)

// followFlags are starter audit --follow's flags.
type followFlags struct {
	follow bool
	cursor string
	settle time.Duration
}

func (f *followFlags) add(fs *flag.FlagSet) {
	fs.BoolVar(&f.follow, "follow", false, "stream a record of every check, decision, claim, refusal and end of every run and session as it happens, as JSON Lines (from now, --since T, or after --cursor C)")
	fs.StringVar(&f.cursor, "cursor", "", "with --follow: resume after the record whose cursor this is")
	fs.DurationVar(&f.settle, "settle", 0, "with --follow: how long a record waits after its history time before it is written (default 5s; see docs/receipts-and-audit.md)")
}

// followAudit writes the audit stream to stdout, one record a line, each written as it comes,
// until ctx ends.
func followAudit(ctx context.Context, sc *client.Client, fo followFlags, since time.Time, stdout io.Writer, fail func(error) int) int {
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	err := sc.FollowAudit(ctx, client.FollowOptions{Cursor: fo.cursor, Since: since, Settle: fo.settle},
		func(rec contract.AuditStreamRecord) error { return enc.Encode(rec) })
	if err != nil {
		return fail(err)
	}
	return 0
}

// readStream reads b as audit stream records (audit --follow's JSON Lines) when its first value
// has a schema_version; ok is false for anything else (a run's audit record).
func readStream(b []byte) (recs []contract.AuditStreamRecord, ok bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	var probe struct {
		SchemaVersion *string `json:"schema_version"`
	}
	if dec.Decode(&probe) != nil || probe.SchemaVersion == nil {
		return nil, false, nil
	}
	dec = json.NewDecoder(bytes.NewReader(b))
	for line := 1; ; line++ {
		var r contract.AuditStreamRecord
		if err := dec.Decode(&r); errors.Is(err, io.EOF) {
			return recs, true, nil
		} else if err != nil {
			return nil, true, fmt.Errorf("audit stream record %d: %w", line, err)
		}
		recs = append(recs, r)
	}
}
