package wheels

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/sandboxflow/sandboxflow/guard"
)

// maxMetadataBytes bounds a wheel's METADATA file.
const maxMetadataBytes = 4 << 20

// unpack checks that w's metadata names p's distribution and version, then unpacks it into
// site.
func (in *Installer) unpack(p guard.Package, w fetched, site string, budget *int64) (metadata, unpacked, error) {
	zr, err := zip.NewReader(bytes.NewReader(w.data), int64(len(w.data)))
	if err != nil {
		return metadata{}, unpacked{}, unsafeErr(p, w, unsafef("not a zip archive: %v", err))
	}
	meta, distInfo, err := readWheelMetadata(zr)
	if err != nil {
		return metadata{}, unpacked{}, unsafeErr(p, w, err)
	}
	if guard.NormalizePackageName(meta.Name) != p.Name || !sameVersion(meta.Version, p.Version) {
		return metadata{}, unpacked{}, &guard.PackageError{Reason: guard.PackageWrongDistribution, Package: p.Name,
			Msg: fmt.Sprintf("%s (sha256:%s) holds %s %s, not %s %s as the lock says", w.file, w.sha256, meta.Name, meta.Version, p.Name, p.Version)}
	}
	dataDir := strings.TrimSuffix(distInfo, ".dist-info") + ".data"
	files := in.cfg.MaxEnvFiles
	u, err := unpackWheel(w.data, dataDir, site, files, budget)
	if err != nil {
		var uw *unsafeWheel
		if errors.As(err, &uw) {
			return metadata{}, unpacked{}, unsafeErr(p, w, err)
		}
		return metadata{}, unpacked{}, err
	}
	return meta, u, nil
}

func unsafeErr(p guard.Package, w fetched, err error) error {
	return &guard.PackageError{Reason: guard.PackageUnsafeWheel, Package: p.Name, Msg: fmt.Sprintf("%s: %v", w.file, err)}
}

// readWheelMetadata finds the one top-level *.dist-info folder holding METADATA and reads it.
func readWheelMetadata(zr *zip.Reader) (metadata, string, error) {
	var found *zip.File
	for _, f := range zr.File {
		dir, base := path.Split(f.Name)
		if base == "METADATA" && strings.Count(dir, "/") == 1 && strings.HasSuffix(dir, ".dist-info/") {
			if found != nil {
				return metadata{}, "", unsafef("two .dist-info folders")
			}
			found = f
		}
	}
	if found == nil {
		return metadata{}, "", unsafef("no .dist-info/METADATA")
	}
	rc, err := found.Open()
	if err != nil {
		return metadata{}, "", unsafef("METADATA: %v", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxMetadataBytes+1))
	if err != nil || len(b) > maxMetadataBytes {
		return metadata{}, "", unsafef("METADATA unreadable or over %d bytes", maxMetadataBytes)
	}
	return parseMetadata(b), strings.TrimSuffix(path.Dir(found.Name), "/"), nil
}

// hookWarnings say what of a wheel's top level would run on its own or shadows the standard
// library.
func hookWarnings(pkg string, tops []string) []string {
	var out []string
	for _, t := range tops {
		mod := moduleName(t)
		switch {
		case strings.HasSuffix(t, ".pth"):
			out = append(out, fmt.Sprintf("%s installs %s, a .pth file: sandboxflow never processes it, but a site-aware Python would run its import lines at start-up", pkg, t))
		case mod == "sitecustomize" || mod == "usercustomize":
			out = append(out, fmt.Sprintf("%s installs %s, which Python imports on its own at start-up where it is on the path (sandboxflow adds the packages after start-up)", pkg, t))
		case mod != "":
			if _, ok := stdlibModules[mod]; ok {
				out = append(out, fmt.Sprintf("%s installs %s, the name of a standard library module it would shadow where it came first on the path", pkg, t))
			}
		}
	}
	return out
}

// moduleName is the importable name of a top-level entry ("x/" or "x.py", "x.cpython-311-...so"),
// or "" for dist-info folders and other files.
func moduleName(top string) string {
	if d, ok := strings.CutSuffix(top, "/"); ok {
		if strings.HasSuffix(d, ".dist-info") || strings.HasSuffix(d, ".data") || strings.Contains(d, ".") {
			return ""
		}
		return d
	}
	for _, ext := range []string{".py", ".pyc", ".so", ".pyd"} {
		if strings.HasSuffix(top, ext) {
			name, _, _ := strings.Cut(top, ".")
			return name
		}
	}
	return ""
}

// inputShadows warns of top-level package modules named as the request's input files are.
func inputShadows(tops []string, inputs []string) []string {
	mods := map[string]string{}
	for _, t := range tops {
		if m := moduleName(t); m != "" {
			mods[m] = t
		}
	}
	var out []string
	for _, in := range inputs {
		first, _, nested := strings.Cut(in, "/")
		if nested {
			first += "/" // a folder of the inputs is a package's name
		}
		if m := moduleName(first); m != "" {
			if t, ok := mods[m]; ok {
				out = append(out, fmt.Sprintf("the packages install %s and the request's input %s has the same module name: which the code imports depends on the path's order (the input's folder comes first)", t, in))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// checkDependencies checks that every requirement of every installed wheel, its markers
// evaluated for the sandbox's Python and the extras asked for, names a distribution of the
// lock at a version its specifier allows. Extras asked for by a requirement count as asked for.
func checkDependencies(pkgs []guard.Package, metas map[string]metadata) error {
	pinned := map[string]guard.Package{}
	extras := map[string][]string{}
	for _, p := range pkgs {
		pinned[p.Name] = p
		extras[p.Name] = slices.Clone(p.Extras)
	}
	for changed, rounds := true, 0; changed && rounds <= len(pkgs)+1; rounds++ {
		changed = false
		for _, p := range pkgs {
			for _, raw := range metas[p.Name].Requires {
				r, ok, err := applies(p, raw, extras[p.Name])
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				dep, inLock := pinned[r.Name]
				if !inLock {
					return &guard.PackageError{Reason: guard.PackageMissingDependency, Package: p.Name,
						Msg: fmt.Sprintf("it requires %q, which the lock does not name: add %s with its hashes", raw, r.Name)}
				}
				if met, ok := satisfiesAll(dep.Version, r.Specifier); ok && !met {
					return &guard.PackageError{Reason: guard.PackageMissingDependency, Package: p.Name,
						Msg: fmt.Sprintf("it requires %q, and the lock pins %s==%s", raw, dep.Name, dep.Version)}
				}
				for _, e := range r.Extras {
					if !slices.Contains(extras[r.Name], e) {
						extras[r.Name] = append(extras[r.Name], e)
						changed = true
					}
				}
			}
		}
	}
	return nil
}

// applies reads one requirement of p and says whether its marker holds.
func applies(p guard.Package, raw string, extras []string) (requirement, bool, error) {
	r, err := parseRequirement(raw)
	if err != nil {
		return requirement{}, false, &guard.PackageError{Reason: guard.PackageMissingDependency, Package: p.Name, Msg: err.Error()}
	}
	ok, err := evalMarker(r.Marker, extras)
	if err != nil {
		return requirement{}, false, &guard.PackageError{Reason: guard.PackageMissingDependency, Package: p.Name, Msg: "cannot evaluate a requirement's " + err.Error()}
	}
	return r, ok, nil
}
