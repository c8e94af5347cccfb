package layers

import (
	"errors"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/sandboxflow/sandboxflow"

// Floors of the house, as import paths below the module.
var (
	groundFloor = []string{"guard", "approval", "receipt", "codec", "egress", "contract", "pysource", "rules"}
	// groundLeaves are ground-floor packages that import nothing of ours: every other floor may
	// import them.
	groundLeaves = []string{"pysource"}
	leafHelpers  = []string{"internal/cli", "internal/defaults", "internal/httpcall", "internal/httpserve", "internal/smallfile"}
	testKits     = "internal/testkit"
	assembly     = "worker/service"
	// assemblers may import the assembly: its command, and the end-to-end suite that builds it.
	assemblers = []string{"worker", "e2e"}
)

// pkg is one package's imports of ours, as paths below the module.
type pkg struct {
	code  []string // non-test files, with and without the integration tag
	tests []string // _test.go files
}

// readTree reads every package of the module under root with go/build, for both build tag
// sets, keeping only imports of ours.
func readTree(t *testing.T, root string) map[string]pkg {
	t.Helper()
	out := map[string]pkg{}
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
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		var p pkg
		found := false
		for _, tags := range [][]string{nil, {"integration"}} {
			ctx := build.Default
			ctx.BuildTags = tags
			bp, err := ctx.ImportDir(path, 0)
			var noGo *build.NoGoError
			if errors.As(err, &noGo) {
				continue
			}
			if err != nil {
				return err
			}
			found = true
			p.code = append(p.code, ours(bp.Imports)...)
			p.tests = append(p.tests, ours(bp.TestImports)...)
			p.tests = append(p.tests, ours(bp.XTestImports)...)
		}
		if found {
			p.code, p.tests = uniq(p.code), uniq(p.tests)
			out[rel] = p
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func ours(imports []string) []string {
	var out []string
	for _, i := range imports {
		if rest, ok := strings.CutPrefix(i, module+"/"); ok {
			out = append(out, rest)
		}
	}
	return out
}

func uniq(s []string) []string {
	sort.Strings(s)
	return slices.Compact(s)
}

func under(path, dir string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }

// violations lists every import that breaks the house's floors.
func violations(tree map[string]pkg) []string {
	var out []string
	for path, p := range tree {
		for _, imp := range p.code {
			switch {
			case slices.Contains(groundLeaves, path):
				out = append(out, path+" (ground-floor leaf) imports "+imp+": a ground-floor leaf imports nothing of ours")
			case slices.Contains(groundFloor, path) && !slices.Contains(groundFloor, imp) &&
				!(under(imp, "internal") && len(tree[imp].code) == 0):
				out = append(out, path+" (ground floor) imports "+imp+": only the ground floor and internal/ packages that import nothing of ours")
			case slices.Contains(groundFloor, path) && imp == "internal/defaults":
				out = append(out, path+" (ground floor) imports internal/defaults: state the defaults explicitly")
			case slices.Contains(leafHelpers, path):
				out = append(out, path+" (leaf helper) imports "+imp+": a leaf helper imports nothing of ours")
			case under(imp, testKits) && !under(path, testKits):
				out = append(out, path+" imports the test kit "+imp+" outside its tests")
			}
		}
		for _, imp := range append(slices.Clone(p.code), p.tests...) {
			if under(imp, assembly) && !slices.Contains(assemblers, path) && !under(path, assembly) {
				out = append(out, path+" imports the worker's assembly "+imp+": only the worker command and the end-to-end suite may")
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestNoPackageImportsUpward(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", root, err)
	}
	tree := readTree(t, root)
	// The test reads the real tree: every floor it checks must be there.
	for _, p := range append(append(slices.Clone(groundFloor), leafHelpers...), assembly, "worker", testKits+"/agenttest") {
		if _, ok := tree[p]; !ok {
			t.Fatalf("package %s not found under %s (got %d packages)", p, root, len(tree))
		}
	}
	for _, v := range violations(tree) {
		t.Error(v)
	}
}

// Each rule reports the import that breaks it, so the test above can fail.
func TestViolationsAreFound(t *testing.T) {
	tree := map[string]pkg{
		"guard":                      {code: []string{"internal/defaults", "internal/human"}},
		"internal/defaults":          {},
		"internal/human":             {code: []string{"guard"}},
		"egress":                     {code: []string{"guard", "client"}},
		"internal/cli":               {code: []string{"guard"}},
		"client":                     {code: []string{"internal/testkit/reviewertest"}, tests: []string{"internal/testkit/devtest"}},
		"starter":                    {tests: []string{"worker/service"}},
		"worker":                     {code: []string{"worker/service"}},
		"e2e":                        {tests: []string{"worker/service", "internal/testkit/agenttest"}},
		"internal/testkit/agenttest": {code: []string{"internal/testkit/devtest"}},
		"pysource":                   {code: []string{"guard"}},
	}
	got := violations(tree)
	want := []string{
		"client imports the test kit internal/testkit/reviewertest outside its tests",
		"egress (ground floor) imports client: only the ground floor and internal/ packages that import nothing of ours",
		"guard (ground floor) imports internal/defaults: state the defaults explicitly",
		"guard (ground floor) imports internal/human: only the ground floor and internal/ packages that import nothing of ours",
		"internal/cli (leaf helper) imports guard: a leaf helper imports nothing of ours",
		"pysource (ground-floor leaf) imports guard: a ground-floor leaf imports nothing of ours",
		"starter imports the worker's assembly worker/service: only the worker command and the end-to-end suite may",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
