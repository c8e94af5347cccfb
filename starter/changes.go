package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
)

// printChanges writes what changed since the previous run or session of a run's or a session's
// (session true) conversation, after the run's whole code or the session's settings: the
// previous one, how it was decided, and the unified diff (its lines escaped by the client), with
// the notice that it is a reading aid only.
func printChanges(w io.Writer, conversation string, session bool, ch *client.Changes, failed string) error {
	if conversation == "" {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nconversation %s: ", terminal(conversation))
	switch {
	case failed != "":
		fmt.Fprintf(&b, "what changed since its previous run or session could not be read: %s\n", terminal(failed))
	case ch == nil || ch.Previous == nil:
		b.WriteString("this is its first run or session (as far as visibility lists).\n")
	default:
		p := ch.Previous
		fmt.Fprintf(&b, "what changed since its previous %s, %s (run id %s, started %s), %s:\n",
			p.Kind(), terminal(p.WorkflowID), terminal(p.RunID), p.Started.UTC().Format(time.RFC3339), terminal(p.Outcome()))
		switch {
		case ch.Diff == "" && (session || p.Session):
			b.WriteString("nothing: the same files and settings (a session's code is its cells, each shown on its own).\n")
		case ch.Diff == "":
			b.WriteString("nothing: the same code, files and settings.\n")
		default:
			fmt.Fprintf(&b, "%d line(s) added, %d removed, in %s\n", ch.Added, ch.Removed, terminal(strings.Join(ch.ChangedFiles, ", ")))
			for _, c := range ch.Packages {
				fmt.Fprintf(&b, "package %s\n", terminal(c.String()))
			}
			b.WriteString(ch.Diff)
		}
	}
	if ch != nil {
		fmt.Fprintf(&b, "NOTE: %s\n", ch.Notice)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
