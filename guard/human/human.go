// Package human writes sizes, durations, limits and network settings the way a person reads
// them. The reviewers' inbox and the starter's terminal output share it, so that both say the
// same thing about a run.
package human

import (
	"fmt"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Bytes writes n as bytes, KiB or MiB: "512 B", "1.5 KiB", "10 MiB".
func Bytes(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/1024)) + " KiB"
	}
	return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<20))) + " MiB"
}

func trimZero(s string) string {
	return strings.TrimSuffix(s, ".0")
}

// Duration writes d the way a person reads it: "45s", "12m", "3h 5m", "2d 4h"; negative is
// "over".
func Duration(d time.Duration) string {
	switch {
	case d < 0:
		return "over"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

// Field is one named value of a run, as a person reads it.
type Field struct {
	K, V string
}

// Limits lists a run's limits in units.
func Limits(l guard.Limits) []Field {
	f := []Field{
		{"timeout", l.Timeout.String()},
		{"stdout", Bytes(l.MaxStdoutBytes)},
		{"stderr", Bytes(l.MaxStderrBytes)},
		{"output files", fmt.Sprintf("%d, %s each, %s in all", l.MaxFiles, Bytes(l.MaxFileBytes), Bytes(l.MaxTotalFileBytes))},
	}
	if l.MaxOutputs > 0 {
		f = append(f, Field{"shown outputs", fmt.Sprintf("%d, %s each, %s in all; %s", l.MaxOutputs, Bytes(l.MaxOutputBytes), Bytes(l.MaxTotalOutputBytes), RuntimeAdds)})
	}
	return f
}

// RuntimeAdds is the fixed line every view shows of what the runtime adds to the code's Python
// (docs/outputs.md): no request changes it.
const RuntimeAdds = "on Docker the runtime adds display(), turns plt.show() and figures left open into outputs, and shows a cell's last expression"

// Network says in a few words what network a run gets.
func Network(req guard.Summary) string {
	switch {
	case len(req.Egress) > 0:
		return fmt.Sprintf("egress: %d host patterns", len(req.Egress))
	case req.Network:
		return "open network"
	}
	return "none"
}

// Metadata lists who asked for a run, leaving out what is empty. The values are as sent: a view
// must still make invisible characters visible.
func Metadata(m guard.Metadata) []Field {
	var out []Field
	for _, f := range []Field{{"agent", m.Agent}, {"requested by", m.RequestedBy}, {"session", m.Session}, {"tool call", m.ToolCallID}} {
		if f.V != "" {
			out = append(out, f)
		}
	}
	return out
}

// ExitSource is what every view writes after a result's exit code when the host did not measure
// it: "" for a measured exit, else why it cannot be taken as the code's own end.
func ExitSource(res guard.Result) string {
	if res.ExitReportedBy != guard.ReportedByInterpreter {
		return ""
	}
	return " (reported by the session's interpreter, not measured by the host: a thread left running in it can report a cell's end and status)"
}
