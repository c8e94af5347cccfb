package wheels

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Defaults of Config. A zero field of a Config takes these values.
const (
	DefaultMaxWheelBytes = 256 << 20
	DefaultMaxEnvBytes   = 2 << 30
	DefaultMaxEnvFiles   = 100_000
	DefaultMaxPageBytes  = 16 << 20
	DefaultFetchTimeout  = 5 * time.Minute
)

// Config configures an Installer. Index and CacheDir are required.
type Config struct {
	// Index is the base URL of a PEP 503 simple index (worker --package-index): a package's page
	// is <Index>/<normalized name>/.
	Index string
	// CacheDir holds verified wheels by hash (wheels/sha256/<hex>/<file>) and the environments
	// built for each lock (envs/<key>/site).
	CacheDir string
	// Header returns the headers (and the names of the secrets they come from) to send with a
	// request for a URL: a private index's credentials. Optional: nil sends none.
	Header func(u *url.URL) (http.Header, []string)
	// Client makes the requests. Optional: defaults to a client with DefaultFetchTimeout.
	Client *http.Client
	// MaxWheelBytes bounds one wheel's download. Optional: defaults to DefaultMaxWheelBytes.
	MaxWheelBytes int64
	// MaxEnvBytes and MaxEnvFiles bound what one lock unpacks to. Optional: default to
	// DefaultMaxEnvBytes and DefaultMaxEnvFiles.
	MaxEnvBytes int64
	MaxEnvFiles int
	// RefuseHooks refuses a lock whose install puts on the import path what would run on its
	// own or shadows another module (worker --package-refuse-hooks) instead of warning.
	RefuseHooks bool
}

// Installer fetches, verifies and unpacks the wheels of requests' locks on the sandbox host.
// It is safe for concurrent use, and several processes may share its CacheDir.
type Installer struct {
	cfg   Config
	index *url.URL
	mu    sync.Mutex
	locks map[string]*sync.Mutex // per environment key: one build at a time in this process
}

// New validates cfg and returns an Installer. It does no I/O.
func New(cfg Config) (*Installer, error) {
	u, err := url.Parse(strings.TrimSuffix(cfg.Index, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("wheels: package index %q is not an http(s) URL", cfg.Index)
	}
	if cfg.CacheDir == "" {
		return nil, errors.New("wheels: no cache folder")
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: DefaultFetchTimeout}
	}
	if cfg.MaxWheelBytes <= 0 {
		cfg.MaxWheelBytes = DefaultMaxWheelBytes
	}
	if cfg.MaxEnvBytes <= 0 {
		cfg.MaxEnvBytes = DefaultMaxEnvBytes
	}
	if cfg.MaxEnvFiles <= 0 {
		cfg.MaxEnvFiles = DefaultMaxEnvFiles
	}
	return &Installer{cfg: cfg, index: u, locks: map[string]*sync.Mutex{}}, nil
}

// Env is a lock's environment, ready to be mounted read-only into a sandbox.
type Env struct {
	// Dir is the site folder: what goes on the code's import path.
	Dir string
	// Report is what the result and the receipt say of the install.
	Report guard.PackagesReport
	// Fetches are the install's requests (none from the cache), Phase install.
	Fetches []guard.EgressAttempt
}

// manifest is what an environment's folder records of its build, beside its site folder.
type manifest struct {
	Installed []guard.InstalledPackage `json:"installed"`
	// Hooks are warnings of what runs on its own or shadows the standard library; Notes what
	// was not installed.
	Hooks []string `json:"hooks,omitempty"`
	Notes []string `json:"notes,omitempty"`
	// TopLevel are the site folder's top-level names ("x.py", "x/").
	TopLevel []string `json:"top_level"`
}

// EnvKey is the name of a lock's environment: the sha256 of its canonical package list.
func EnvKey(pkgs []guard.Package) string {
	h := sha256.New()
	var n [8]byte
	put := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	put("sandboxflow/wheels/env/v1")
	for _, p := range pkgs {
		put(p.Name)
		put(p.Version)
		put(strings.Join(p.Extras, ","))
		put(strings.Join(p.Hashes, ","))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Install returns the environment of pkgs, built now or by an earlier run (then without a
// connection). inputs are the request's input file names: a package module of the same name is
// warned of. Errors are *guard.PackageError, or an error of the host's own (its disk).
func (in *Installer) Install(ctx context.Context, pkgs []guard.Package, inputs []string) (Env, error) {
	start := time.Now()
	key := EnvKey(pkgs)
	envDir := filepath.Join(in.cfg.CacheDir, "envs", key)
	lock := in.keyLock(key)
	lock.Lock()
	defer lock.Unlock()
	m, err := readManifest(envDir)
	cached := err == nil
	var fetches []guard.EgressAttempt
	if !cached {
		f := &fetcher{client: in.cfg.Client, header: in.cfg.Header}
		m, err = in.build(ctx, pkgs, envDir, f)
		fetches = f.attempts
		if err != nil {
			return Env{Fetches: fetches}, err
		}
	}
	warnings := slices.Concat(m.Hooks, inputShadows(m.TopLevel, inputs))
	if in.cfg.RefuseHooks && len(warnings) > 0 {
		return Env{Fetches: fetches}, &guard.PackageError{Reason: guard.PackageHooksRefused,
			Msg: strings.Join(warnings, "; ") + " (this worker refuses these: --package-refuse-hooks)"}
	}
	return Env{
		Dir: filepath.Join(envDir, "site"),
		Report: guard.PackagesReport{Installed: m.Installed, Warnings: slices.Concat(warnings, m.Notes),
			Cached: cached, Duration: time.Since(start)},
		Fetches: fetches,
	}, nil
}

func (in *Installer) keyLock(key string) *sync.Mutex {
	in.mu.Lock()
	defer in.mu.Unlock()
	l, ok := in.locks[key]
	if !ok {
		l = &sync.Mutex{}
		in.locks[key] = l
	}
	return l
}

func readManifest(envDir string) (manifest, error) {
	b, err := os.ReadFile(filepath.Join(envDir, "manifest.json"))
	if err != nil {
		return manifest{}, err
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return manifest{}, fmt.Errorf("wheels: read %s: %w", envDir, err)
	}
	return m, nil
}

// build fetches and verifies every wheel, checks the dependencies, unpacks them into a
// temporary folder and renames it to envDir (a concurrent build of the same lock by another
// process wins the rename; both are the same verified bytes).
func (in *Installer) build(ctx context.Context, pkgs []guard.Package, envDir string, f *fetcher) (manifest, error) {
	if err := os.MkdirAll(filepath.Dir(envDir), 0o755); err != nil {
		return manifest{}, fmt.Errorf("wheels: make %s: %w", filepath.Dir(envDir), err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(envDir), ".build-")
	if err != nil {
		return manifest{}, fmt.Errorf("wheels: temporary folder: %w", err)
	}
	defer func() {
		_ = makeWritable(tmp)
		_ = os.RemoveAll(tmp)
	}()
	site := filepath.Join(tmp, "site")
	var m manifest
	metas := map[string]metadata{}
	budget := in.cfg.MaxEnvBytes
	for _, p := range pkgs {
		w, err := in.wheel(ctx, p, f)
		if err != nil {
			return manifest{}, err
		}
		meta, u, err := in.unpack(p, w, site, &budget)
		if err != nil {
			return manifest{}, err
		}
		metas[p.Name] = meta
		m.Installed = append(m.Installed, guard.InstalledPackage{Name: p.Name, Version: p.Version, File: w.file, SHA256: w.sha256})
		m.TopLevel = append(m.TopLevel, u.TopLevel...)
		m.Hooks = append(m.Hooks, hookWarnings(p.Name, u.TopLevel)...)
		for _, s := range u.Skipped {
			m.Notes = append(m.Notes, fmt.Sprintf("%s: %s is not installed (only the import path is)", p.Name, s))
		}
	}
	if err := checkDependencies(pkgs, metas); err != nil {
		return manifest{}, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return manifest{}, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "manifest.json"), b, 0o444); err != nil {
		return manifest{}, fmt.Errorf("wheels: write manifest: %w", err)
	}
	if err := makeReadOnly(tmp); err != nil {
		return manifest{}, fmt.Errorf("wheels: make %s read-only: %w", tmp, err)
	}
	if err := os.Rename(tmp, envDir); err != nil {
		if _, rerr := readManifest(envDir); rerr == nil {
			return m, nil // another process built it first
		}
		return manifest{}, fmt.Errorf("wheels: keep environment %s: %w", envDir, err)
	}
	return m, nil
}

func makeWritable(dir string) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
}

// fetched is one verified wheel.
type fetched struct {
	file   string
	sha256 string
	data   []byte
}

// wheel returns p's verified wheel from the cache, or fetches it from the index.
func (in *Installer) wheel(ctx context.Context, p guard.Package, f *fetcher) (fetched, error) {
	for _, h := range p.Hashes {
		hexPart, ok := strings.CutPrefix(h, "sha256:")
		if !ok {
			continue
		}
		if w, ok := in.cachedWheel(p, hexPart); ok {
			return w, nil
		}
	}
	return in.fetchWheel(ctx, p, f)
}

// cachedWheel reads a wheel the cache holds under hex, checking its hash again (a cache file
// changed on disk is not used).
func (in *Installer) cachedWheel(p guard.Package, hexPart string) (fetched, bool) {
	dir := filepath.Join(in.cfg.CacheDir, "wheels", "sha256", hexPart)
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 {
		return fetched{}, false
	}
	data, err := os.ReadFile(filepath.Join(dir, ents[0].Name()))
	if err != nil {
		return fetched{}, false
	}
	sum := sha256.Sum256(data)
	w, ok := parseWheelName(ents[0].Name())
	if hex.EncodeToString(sum[:]) != hexPart || !ok || w.Name != p.Name || !sameVersion(w.Version, p.Version) {
		return fetched{}, false
	}
	return fetched{file: ents[0].Name(), sha256: hexPart, data: data}, true
}

// fetchWheel reads p's index page, downloads its compatible wheels in the page's order and
// keeps the first whose hash the lock names, storing it in the cache.
func (in *Installer) fetchWheel(ctx context.Context, p guard.Package, f *fetcher) (fetched, error) {
	page := in.index.JoinPath(p.Name) // JoinPath drops the trailing slash
	page.Path += "/"
	body, status, err := f.get(ctx, page, DefaultMaxPageBytes)
	if err != nil {
		return fetched{}, unreachable(p, page, err)
	}
	if body == nil {
		return fetched{}, &guard.PackageError{Reason: guard.PackageNotFound, Package: p.Name,
			Msg: fmt.Sprintf("the index has no page for it (%s answered %d)", page.Redacted(), status)}
	}
	var candidates []link
	var sdists, others []string
	for _, l := range parseIndexPage(body, page) {
		w, ok := parseWheelName(l.File)
		switch {
		case ok && w.Name == p.Name && sameVersion(w.Version, p.Version) && w.compatible():
			candidates = append(candidates, l)
		case ok && w.Name == p.Name && sameVersion(w.Version, p.Version):
			others = append(others, l.File)
		case sdistOf(l.File, p.Name, p.Version):
			sdists = append(sdists, l.File)
		}
	}
	switch {
	case len(candidates) == 0 && len(sdists) > 0:
		return fetched{}, &guard.PackageError{Reason: guard.PackageSdistOnly, Package: p.Name,
			Msg: fmt.Sprintf("version %s is served only as a source distribution (%s), whose build code would run: refused; lock a version with a wheel", p.Version, strings.Join(sdists, ", "))}
	case len(candidates) == 0:
		msg := fmt.Sprintf("the index serves no wheel of version %s", p.Version)
		if len(others) > 0 {
			msg += " for CPython 3.11 on linux x86_64 (it serves " + strings.Join(others, ", ") + ")"
		}
		return fetched{}, &guard.PackageError{Reason: guard.PackageNotFound, Package: p.Name, Msg: msg}
	}
	var computed []string
	for _, l := range candidates {
		data, _, err := f.get(ctx, l.URL, in.cfg.MaxWheelBytes)
		if err != nil || data == nil {
			if err == nil {
				err = errors.New("not found")
			}
			return fetched{}, unreachable(p, l.URL, err)
		}
		sums := hashes(data)
		for _, h := range p.Hashes {
			if sums[h] {
				return in.keep(l.File, data)
			}
		}
		computed = append(computed, fmt.Sprintf("%s has sha256:%s", l.File, sha256Hex(data)))
	}
	return fetched{}, &guard.PackageError{Reason: guard.PackageHashMismatch, Package: p.Name,
		Msg: fmt.Sprintf("%s; the lock allows %s", strings.Join(computed, ", "), strings.Join(p.Hashes, ", "))}
}

func unreachable(p guard.Package, u *url.URL, err error) error {
	return &guard.PackageError{Reason: guard.PackageIndexUnreachable, Package: p.Name,
		Msg: fmt.Sprintf("fetch %s: %v", u.Redacted(), err)}
}

// hashes are data's "algo:hex" digests in every algorithm a lock may name.
func hashes(data []byte) map[string]bool {
	out := map[string]bool{}
	for algo, h := range map[string]hash.Hash{"sha256": sha256.New(), "sha384": sha512.New384(), "sha512": sha512.New()} {
		h.Write(data)
		out[algo+":"+hex.EncodeToString(h.Sum(nil))] = true
	}
	return out
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// keep stores a verified wheel in the cache by its sha256 (via a temporary file and a rename).
func (in *Installer) keep(file string, data []byte) (fetched, error) {
	w := fetched{file: file, sha256: sha256Hex(data), data: data}
	if strings.ContainsAny(file, `/\`) || strings.HasPrefix(file, ".") {
		return fetched{}, unsafeErr(guard.Package{}, w, unsafef("not a file name"))
	}
	dir := filepath.Join(in.cfg.CacheDir, "wheels", "sha256", w.sha256)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fetched{}, fmt.Errorf("wheels: cache: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".wheel-")
	if err != nil {
		return fetched{}, fmt.Errorf("wheels: cache: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, file), data, 0o444); err != nil {
		_ = os.RemoveAll(tmp)
		return fetched{}, fmt.Errorf("wheels: cache: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp) // another run kept the same bytes first
	}
	return w, nil
}
