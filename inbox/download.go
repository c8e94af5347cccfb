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

// download is the handler of a run's or a session's downloads: it sends, as a plain-text
// attachment and never as a page, an input file (input-N, in name order: what the reviewer
// approves) or what the output of load's downloads serves: a finished run's stdout, stderr or
// output file (file-N), a cell's (cell-C-stdout, cell-C-stderr, cell-C-file-N). load reads the
// run or the session; one it cannot read is notFound and its id.
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
	sendAttachment(w, downloadName(names[i]), files[names[i]])
}

// sendResultPart sends part of a result: "stdout", "stderr" or "file-N" (N: its index in
// res.Files).
func sendResultPart(w http.ResponseWriter, res *guard.Result, part string) {
	switch {
	case part == "stdout":
		sendAttachment(w, "stdout.txt", res.Stdout)
	case part == "stderr":
		sendAttachment(w, "stderr.txt", res.Stderr)
	case strings.HasPrefix(part, "file-"):
		n, err := strconv.Atoi(strings.TrimPrefix(part, "file-"))
		if err != nil || n < 0 || n >= len(res.Files) {
			http.Error(w, "no such file", http.StatusNotFound)
			return
		}
		sendAttachment(w, downloadName(res.Files[n].Name), res.Files[n].Content)
	default:
		http.Error(w, "no such download", http.StatusNotFound)
	}
}
