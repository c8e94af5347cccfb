package inbox

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/sandboxflow/sandboxflow/guard"
)

// downloads is what a run's or a session's page offers for download, once it was read.
type downloads struct {
	// runID is the run it was read from.
	runID string
	// inputFiles reads the input files run runID of workflow id was started with.
	inputFiles func(ctx context.Context, id, runID string) (map[string][]byte, error)
	// output sends what a download names that is not an input file.
	output func(w http.ResponseWriter, r *http.Request, what string)
}

// download is the handler of a run's or a session's downloads: it sends, as an attachment and
// never as a page (sendBytes), an input file (input-N, in name order: what the reviewer
// approves) or what the output of load's downloads serves: a finished run's stdout, stderr,
// output file (file-N) or output (output-N), a cell's (cell-C-stdout, cell-C-stderr,
// cell-C-file-N, cell-C-output-N). With ?inline=1, a file or output that is a picture the inbox
// draws is sent as a picture, for the page's <img>. load reads the run or the session; one it
// cannot read is notFound and its id.
func (s *Server) download(notFound string, load func(ctx context.Context, id string) (downloads, error)) func(http.ResponseWriter, *http.Request, *signIn) {
	return func(w http.ResponseWriter, r *http.Request, _ *signIn) {
		s.serveDownload(w, r, notFound, load)
	}
}

// serveDownload is a request to download.
func (s *Server) serveDownload(w http.ResponseWriter, r *http.Request, notFound string, load func(ctx context.Context, id string) (downloads, error)) {
	id, what := r.PathValue("id"), r.PathValue("what")
	d, err := load(r.Context(), id)
	if err != nil {
		http.Error(w, notFound+id, http.StatusNotFound)
		return
	}
	n, ok := strings.CutPrefix(what, "input-")
	if !ok {
		d.output(w, r, what)
		return
	}
	files, err := d.inputFiles(r.Context(), id, d.runID)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	names := slices.Sorted(maps.Keys(files))
	i, err := strconv.Atoi(n)
	if err != nil || i < 0 || i >= len(names) {
		http.Error(w, "no such input file", http.StatusNotFound)
		return
	}
	sendBytes(w, names[i], files[names[i]], false)
}

// sendResultPart sends part of a result: "stdout", "stderr", "file-N" (N: its index in
// res.Files) or "output-N" (N: its index in res.Outputs), as a picture when inline and it is one
// the inbox draws.
func sendResultPart(w http.ResponseWriter, res *guard.Result, part string, inline bool) {
	kind, num, _ := strings.Cut(part, "-")
	n, err := strconv.Atoi(num)
	switch {
	case part == "stdout" || part == "stderr":
		b := res.Stdout
		if part == "stderr" {
			b = res.Stderr
		}
		sendBytes(w, part+".txt", b, inline)
	case kind == "file" && err == nil && n >= 0 && n < len(res.Files):
		sendBytes(w, res.Files[n].Name, res.Files[n].Content, inline)
	case kind == "output" && err == nil && n >= 0 && n < len(res.Outputs) && !res.Outputs[n].LeftOut:
		o := res.Outputs[n]
		sendBytes(w, outputName(o), o.Data, inline)
	default:
		http.Error(w, "no such download", http.StatusNotFound)
	}
}

// wantsInline says the request asks for a picture to draw (?inline=1), not a download.
func wantsInline(r *http.Request) bool { return r.URL.Query().Get("inline") == "1" }
