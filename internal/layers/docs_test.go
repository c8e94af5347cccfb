package layers

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// maxReadmeLines is the most README.md may hold: what it is, the picture, the two set-up
// commands, the doors and where things live. Everything else lives in docs/.
const maxReadmeLines = 400

// moduleRoot walks up from the test's folder to the folder that holds go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}

// markdownFiles lists README.md and every .md file under docs/, as paths relative to root.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var (
	fence   = regexp.MustCompile("^\\s*(```|~~~)")
	heading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	// link matches [text](target) and ![alt](target); the target ends at a space or ')'.
	link       = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	inlineCode = regexp.MustCompile("`[^`]*`")
	mdLink     = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// prose returns the lines of a markdown text that are outside fenced code blocks, with their
// 1-based line numbers; lines inside a fence are returned empty.
func prose(text string) []string {
	lines := strings.Split(text, "\n")
	out := make([]string, len(lines))
	in := false
	for i, l := range lines {
		if fence.MatchString(l) {
			in = !in
			continue
		}
		if !in {
			out[i] = l
		}
	}
	return out
}

// anchors returns the GitHub-style anchors the headings of a markdown text produce: the
// heading's text as rendered, lower-cased, without punctuation but '-' and '_', spaces turned
// into '-'; a repeated anchor gets -1, -2, ... as GitHub gives it.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose(text) {
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a := anchor(m[1])
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// anchor is the GitHub anchor of one heading's markdown text.
func anchor(h string) string {
	h = mdLink.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// brokenLinks lists every relative link of the markdown file rel (under root) that names no
// file, or a heading its file does not have.
func brokenLinks(root, rel string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return nil, err
	}
	var out []string
	for i, l := range prose(string(b)) {
		for _, m := range link.FindAllStringSubmatch(inlineCode.ReplaceAllString(l, ""), -1) {
			target := m[1]
			if u, err := url.Parse(target); err == nil && u.Scheme != "" {
				continue // http:, https:, mailto: are not ours to check
			}
			file, frag, _ := strings.Cut(target, "#")
			path := filepath.Join(root, filepath.Dir(rel), filepath.FromSlash(file))
			if file == "" {
				path = filepath.Join(root, rel)
			}
			where := fmt.Sprintf("%s:%d: link %s", rel, i+1, target)
			if !strings.HasPrefix(filepath.Clean(path), root) {
				out = append(out, where+" leaves the repository")
				continue
			}
			st, err := os.Stat(path)
			if err != nil {
				out = append(out, where+": no such file")
				continue
			}
			if frag == "" {
				continue
			}
			if st.IsDir() || !strings.HasSuffix(path, ".md") {
				out = append(out, where+": an anchor into a file that is not markdown")
				continue
			}
			text, err := os.ReadFile(path)
			if err != nil {
				return nil, err
			}
			if !anchors(string(text))[frag] {
				out = append(out, where+": no heading there makes the anchor #"+frag)
			}
		}
	}
	return out, nil
}

func TestMarkdownLinksResolve(t *testing.T) {
	root := moduleRoot(t)
	files := markdownFiles(t, root)
	if len(files) < 2 {
		t.Fatalf("found only %v: the manual lives in README.md and docs/", files)
	}
	for _, f := range files {
		broken, err := brokenLinks(root, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range broken {
			t.Error(b)
		}
	}
}

func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines; want at most %d: move the detail into a document under docs/ and link it", n, maxReadmeLines)
	}
}

// sessionRef is a reference to the development log ("session 32 did X"), which belongs in no
// document but the benchmarks' history.
var sessionRef = regexp.MustCompile(`(?i)\bsessions? \d+\b`)

func TestManualHoldsNoDevelopmentLog(t *testing.T) {
	root := moduleRoot(t)
	for _, f := range markdownFiles(t, root) {
		if f == "docs/benchmarks.md" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range strings.Split(string(b), "\n") {
			if m := sessionRef.FindString(l); m != "" {
				t.Errorf("%s:%d: %q reads as a development log entry; say what the code does (history goes by date or commit, in docs/benchmarks.md only)", f, i+1, m)
			}
		}
	}
}

// packagesWithoutDoc lists every folder under root holding non-test Go files (with any build
// tags) none of which carries a doc comment on its package clause.
func packagesWithoutDoc(root string) ([]string, error) {
	var out []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules" || name == "vendor") {
			return filepath.SkipDir
		}
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		code, documented := false, false
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
				continue
			}
			code = true
			f, err := parser.ParseFile(fset, filepath.Join(path, n), nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				return err
			}
			if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
				documented = true
			}
		}
		if code && !documented {
			rel, _ := filepath.Rel(root, path)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

func TestEveryPackageHasADoc(t *testing.T) {
	root := moduleRoot(t)
	missing, err := packagesWithoutDoc(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range missing {
		t.Errorf("package %s has no doc comment: write `// Package name ...` (or `// Command ...` for a main) above the package clause of one file, best a doc.go", p)
	}
}

// The checks find what they are for, so the tests above can fail.
func TestDocChecksFindFaults(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Top\n\nSee [ops](docs/ops.md#the-worker-flags), [gone](docs/gone.md), [bad](docs/ops.md#nowhere),\n"+
		"[here](#top), [there](#missing), [web](https://example.com/x), `[code](docs/none.md)`.\n"+
		"```\n[fenced](docs/none.md)\n# Not a heading\n```\n")
	write("docs/ops.md", "# Ops\n\n## The worker: `flags`\n\n## Dup\n\n## Dup\n\n[up](../README.md#top) [dup](#dup-1) [fence](#not-a-heading)\n")
	var got []string
	for _, f := range []string{"README.md", "docs/ops.md"} {
		b, err := brokenLinks(root, f)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b...)
	}
	want := []string{
		"README.md:3: link docs/gone.md: no such file",
		"README.md:3: link docs/ops.md#nowhere: no heading there makes the anchor #nowhere",
		"README.md:4: link #missing: no heading there makes the anchor #missing",
		"docs/ops.md:9: link #not-a-heading: no heading there makes the anchor #not-a-heading",
	}
	if !slices.Equal(got, want) {
		t.Errorf("broken links:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	write("good/doc.go", "//go:build integration\n\n// Package good is documented.\npackage good\n")
	write("good/more.go", "package good\n")
	write("cmd/main.go", "// Command cmd is documented.\npackage main\n")
	write("bare/bare.go", "// A comment apart from the clause.\n\npackage bare\n")
	write("bare/bare_test.go", "// Package bare is documented in a test only.\npackage bare\n")
	write("testsonly/x_test.go", "package testsonly\n")
	missing, err := packagesWithoutDoc(root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(missing, []string{"bare"}) {
		t.Errorf("packages without doc: %v; want [bare]", missing)
	}

	for h, want := range map[string]string{
		"Watching a run as it runs: `starter watch`":        "watching-a-run-as-it-runs-starter-watch",
		"Notifications: reviewers hear of a waiting run":    "notifications-reviewers-hear-of-a-waiting-run",
		"Quorum: M reviewers for a run":                     "quorum-m-reviewers-for-a-run",
		"Temporal on PostgreSQL":                            "temporal-on-postgresql",
		"End to end (`make bench-e2e`)":                     "end-to-end-make-bench-e2e",
		"Egress: named hosts, secrets_file and [a link](x)": "egress-named-hosts-secrets_file-and-a-link",
	} {
		if got := anchor(h); got != want {
			t.Errorf("anchor(%q) = %q; want %q", h, got, want)
		}
	}
}
