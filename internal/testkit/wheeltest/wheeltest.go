// Package wheeltest builds wheels and serves them from a PEP 503 simple index of a test's own on
// loopback, for the tests of the package install.
package wheeltest

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
)

// Wheel describes a wheel to build.
type Wheel struct {
	Name, Version string
	// Tag is the wheel's python-abi-platform tag; "" means "py3-none-any".
	Tag string
	// Requires are its Requires-Dist lines.
	Requires []string
	// Files are its files by path in the archive (the dist-info is added).
	Files map[string]string
	// MetaName and MetaVersion, when set, are what its METADATA says instead of Name and
	// Version (a wheel of another distribution served under Name).
	MetaName, MetaVersion string
}

func (w Wheel) distName() string { return strings.NewReplacer("-", "_", ".", "_").Replace(w.Name) }

// FileName is the wheel's file name.
func (w Wheel) FileName() string {
	tag := w.Tag
	if tag == "" {
		tag = "py3-none-any"
	}
	return fmt.Sprintf("%s-%s-%s.whl", w.distName(), w.Version, tag)
}

// Build returns the wheel's bytes: its files, METADATA, WHEEL and RECORD, as PEP 427 lays
// them out.
func (w Wheel) Build() []byte {
	name, version := w.Name, w.Version
	if w.MetaName != "" {
		name = w.MetaName
	}
	if w.MetaVersion != "" {
		version = w.MetaVersion
	}
	info := fmt.Sprintf("%s-%s.dist-info/", w.distName(), w.Version)
	meta := fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version)
	for _, r := range w.Requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	files := map[string]string{info + "METADATA": meta + "\nA test package.\n", info + "WHEEL": "Wheel-Version: 1.0\nGenerator: wheeltest\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
	for p, c := range w.Files {
		files[p] = c
	}
	names := make([]string, 0, len(files))
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	var record strings.Builder
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, p := range names {
		sum := sha256.Sum256([]byte(files[p]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[p]))
		write(zw, p, files[p])
	}
	record.WriteString(info + "RECORD,,\n")
	write(zw, info+"RECORD", record.String())
	if err := zw.Close(); err != nil {
		panic(err) // writing to memory
	}
	return buf.Bytes()
}

func write(zw *zip.Writer, name, content string) {
	f, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate})
	if err == nil {
		_, err = f.Write([]byte(content))
	}
	if err != nil {
		panic(err) // writing to memory
	}
}

// Hash is data's lock hash, "sha256:<hex>".
func Hash(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Line is a lock's requirement for name==version allowing data's hash.
func Line(name, version string, data ...[]byte) string {
	s := name + "==" + version
	for _, d := range data {
		s += " --hash=" + Hash(d)
	}
	return s + "\n"
}

// Index is a PEP 503 simple index served from a folder by a Go file server on 127.0.0.1: a
// project's page is its folder's listing, whose hrefs are relative.
type Index struct {
	Dir    string
	Server *httptest.Server
	hits   atomic.Int64
	// auth, when set, is the Authorization header every request must carry (a private index).
	auth string
}

// NewIndex starts an empty index; it stops with the test.
func NewIndex(t testing.TB) *Index {
	t.Helper()
	ix := &Index{Dir: t.TempDir()}
	ix.Server = httptest.NewServer(ix.handler())
	t.Cleanup(ix.Server.Close)
	return ix
}

// NewPrivateIndex starts an empty index over TLS (its Server.Client trusts it) that answers 401
// to a request without "Authorization: auth".
func NewPrivateIndex(t testing.TB, auth string) *Index {
	t.Helper()
	ix := &Index{Dir: t.TempDir(), auth: auth}
	ix.Server = httptest.NewTLSServer(ix.handler())
	t.Cleanup(ix.Server.Close)
	return ix
}

func (ix *Index) handler() http.Handler {
	files := http.StripPrefix("/simple/", http.FileServer(http.Dir(ix.Dir)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ix.hits.Add(1)
		if ix.auth != "" && r.Header.Get("Authorization") != ix.auth {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		files.ServeHTTP(w, r)
	})
}

// URL is the index's base URL (worker --package-index).
func (ix *Index) URL() string { return ix.Server.URL + "/simple" }

// Requests counts the requests the index answered.
func (ix *Index) Requests() int64 { return ix.hits.Load() }

// Add serves data as file on project's page.
func (ix *Index) Add(t testing.TB, project, file string, data []byte) {
	t.Helper()
	dir := filepath.Join(ix.Dir, project)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// AddWheel builds w, serves it on its project's page and returns its bytes.
func (ix *Index) AddWheel(t testing.TB, w Wheel) []byte {
	t.Helper()
	data := w.Build()
	ix.Add(t, strings.ToLower(w.Name), w.FileName(), data)
	return data
}
