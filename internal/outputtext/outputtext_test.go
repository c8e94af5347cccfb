package outputtext

import (
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
)

var table = guard.TableOutput{
	Columns: []string{"name", "n"},
	Index:   []string{"0", "1"},
	Rows:    [][]string{{"alpha", "1"}, {"b\x1b[2J\nc", "22"}},
}

func TestAlignedEscapesEveryCell(t *testing.T) {
	got := Aligned(table)
	want := "   name         n\n" +
		"0  alpha        1\n" +
		`1  b\x1b[2J\nc  22` + "\n"
	if got != want {
		t.Errorf("Aligned:\n%s\nwant:\n%s", got, want)
	}
}

func TestTableTextFallsBackToCSVThenClips(t *testing.T) {
	wide := guard.TableOutput{Columns: []string{"a", "b"}, Rows: [][]string{{strings.Repeat("x", 200), "1"}}}
	for range 50 {
		wide.Rows = append(wide.Rows, []string{"y", "2"})
	}
	if got := TableText(wide, 1<<20); got != Aligned(wide) {
		t.Errorf("a table that fits is not drawn aligned:\n%s", got)
	}
	got := TableText(wide, 1000)
	if !strings.HasPrefix(got, "(as CSV") || !strings.Contains(got, "y,2\n") || len(got) > 1100 {
		t.Errorf("a table too wide aligned: %d bytes:\n%s\nwant it as CSV", len(got), got)
	}
	got = TableText(wide, 300)
	if !strings.HasPrefix(got, "(as CSV, the first ") || strings.Count(got, "\n") > 40 {
		t.Errorf("a table too big even as CSV:\n%s\nwant its first lines, said so", got)
	}
}

func TestDescribe(t *testing.T) {
	data := []byte(`{"columns":["a","b","c"],"rows":[["1","2","3"],["4","5","6"]]}`)
	for _, tc := range []struct {
		o    guard.Output
		want string
	}{
		{guard.Output{Source: guard.OutputFigure, MIME: guard.MIMEPNG, Size: 2048, Data: []byte("x")}, "figure, image/png, 2 KiB"},
		{guard.Output{Source: guard.OutputDisplay, MIME: guard.MIMETable, Size: int64(len(data)), Data: data}, "display, table, 2 rows × 3 columns, 62 B"},
		{guard.Output{Source: guard.OutputValue, MIME: guard.MIMEHTML, Size: 3 << 20, LeftOut: true}, "value, text/html, 3 MiB, left out (over the output limits)"},
		{guard.Output{Source: "figure\x1b[1m", MIME: guard.MIMETable, Size: 2, Data: []byte("{}x")}, `figure\x1b[1m, application/vnd.sandboxflow.table+json (not a table this door can read), 2 B`},
	} {
		if got := Describe(tc.o); got != tc.want {
			t.Errorf("Describe(%+v) = %q; want %q", tc.o, got, tc.want)
		}
	}
}
