package layers

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function may be, from its func keyword's line to its closing
// brace's line, inclusive.
const maxFuncLines = 80

// skipNonModuleDir reports whether a directory below the root holds no code of the module's own.
func skipNonModuleDir(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
		name == "testdata" || name == "vendor" || name == "node_modules"
}

// longFuncs lists, as "file:line name (N lines)", every function declaration and function
// literal in file (read from path) longer than limit lines. Literals are named after the declaration holding them.
func longFuncs(fset *token.FileSet, file *ast.File, path string, limit int) []string {
	var out []string
	report := func(what string, from, to token.Pos) {
		start, end := fset.Position(from), fset.Position(to)
		if n := end.Line - start.Line + 1; n > limit {
			out = append(out, fmt.Sprintf("%s:%d %s (%d lines)", path, start.Line, what, n))
		}
	}
	for _, decl := range file.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok {
			// Function literals outside any function: package-level variables.
			ast.Inspect(decl, func(n ast.Node) bool {
				if lit, ok := n.(*ast.FuncLit); ok {
					report("func literal", lit.Pos(), lit.Body.Rbrace)
				}
				return true
			})
			continue
		}
		if fd.Body == nil {
			continue
		}
		report(funcName(fd), fd.Pos(), fd.Body.Rbrace)
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if lit, ok := n.(*ast.FuncLit); ok {
				report("func literal in "+funcName(fd), lit.Pos(), lit.Body.Rbrace)
			}
			return true
		})
	}
	return out
}

// funcName names a declaration as Recv.Name for methods, Name otherwise.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// TestNoLongFunctions keeps every function of the module's non-test files, under every build
// tag, at most maxFuncLines long: a longer one holds more than one job, and its steps want names.
func TestNoLongFunctions(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	var long []string
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipNonModuleDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(root, path)
		long = append(long, longFuncs(fset, file, filepath.ToSlash(rel), maxFuncLines)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The test reads the real tree: a walk that found nothing checked nothing.
	if files < 50 {
		t.Fatalf("only %d non-test .go files found under %s", files, root)
	}
	for _, l := range long {
		t.Errorf("%s: longer than %d lines; split it into steps that each do one job", l, maxFuncLines)
	}
}

// The check counts from the func keyword's line to the closing brace's line, and reports
// declarations, methods and literals (nested ones too) by file, line and name.
func TestLongFunctionsAreFound(t *testing.T) {
	body := func(n int) string { return strings.Repeat("\tx++\n", n) }
	src := "package p\n\n" + // lines 1-2
		"func short() {\n" + body(78) + "}\n" + // lines 3-82: 80 lines
		"func long(x int) {\n" + body(79) + "}\n" + // lines 83-163: 81 lines
		"type T struct{}\n" + // line 164
		"func (t *T) M() {\n" + // line 165
		"\tf := func() {\n" + body(80) + "\t}\n" + // lines 166-247: literal of 82 lines
		"\t_ = f\n}\n" + // lines 248-249: method of 85 lines
		"var v = func() {\n" + body(79) + "}\n" // lines 250-330: 81 lines
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := longFuncs(fset, file, "p.go", 80)
	want := []string{
		"p.go:83 long (81 lines)",
		"p.go:165 T.M (85 lines)",
		"p.go:166 func literal in T.M (82 lines)",
		"p.go:250 func literal (81 lines)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
