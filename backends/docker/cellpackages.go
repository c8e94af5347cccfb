package docker

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/wheels"
)

// Packages in a session's cells (issue 48). Every session container of a backend with packages
// configured mounts a folder of its own read-only at PackagesMount, its slot: the environment
// of the session's settings' lock is linked at its root when it opens, and the environment of
// the whole set so far plus a cell's additions is linked into a new subfolder cell-<index>-<random>
// before that cell runs. The cell frame names that subfolder and the supervisor puts it on the Python
// interpreter's path before the earlier packages entry; the additions never change a version
// the session has (guard.AddCellPackages), so modules already imported stay valid.

// cellDirPrefix starts the name of a cell's subfolder of a session's slot: cellDirPrefix, its
// index, "-" and a random suffix.
const cellDirPrefix = "cell-"

// sessionSlot makes the folder a new session's container mounts at PackagesMount, holding env
// (nil: empty) at its root; "" when this host installs no packages.
func (b *Backend) sessionSlot(env *wheels.Env) (string, error) {
	if b.pkgSlots == "" {
		return "", nil
	}
	if err := os.MkdirAll(b.pkgSlots, 0o755); err != nil {
		return "", &guard.IntegrationError{Op: "docker: package slots", Err: err}
	}
	dir, err := os.MkdirTemp(b.pkgSlots, "session-")
	if err == nil && env != nil {
		err = wheels.LinkEnv(env.Dir, dir)
	}
	if err == nil {
		// Open for the host to add cells' subfolders; the container's mount is read-only.
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		if dir != "" {
			_ = wheels.RemoveTree(dir)
		}
		return "", &guard.IntegrationError{Op: "docker: session package slot", Err: err}
	}
	return dir, nil
}

// removeSlot removes a session's slot; a failure is logged (the folder is under the backend's
// own slots folder).
func (b *Backend) removeSlot(dir string) {
	if dir == "" {
		return
	}
	if err := wheels.RemoveTree(dir); err != nil {
		b.log.Warn("session package slot not removed", "dir", dir, "error", err)
	}
}

// refuseCellPackages says why cell's packages cannot be added to this session: the host
// installs no packages (the same ConfigError a run with packages gets), or the session was
// taken over from another worker, which knows neither its slot nor what it installed.
func (s *Session) refuseCellPackages(cell guard.Cell) error {
	if len(cell.Packages) == 0 {
		return nil
	}
	if s.b.cfg.Packages == nil {
		return &guard.ConfigError{Msg: "docker backend: this sandbox host installs no packages: it has no package index (worker --package-index)"}
	}
	if s.slot == "" {
		return &guard.ConfigError{Msg: "docker backend: this session was taken over from another worker, which installed its packages; " + cell.String() + " brings packages it cannot add: open a new session"}
	}
	return nil
}

// addPackages installs the environment of the session's installed set plus cell's packages
// and links it into the slot's subfolder for cell, whose name it returns ("" for a cell
// without packages). It verifies again that the cell only adds to what this sandbox has.
// Nothing of the cell has run when it fails; the session stays as it was.
func (s *Session) addPackages(ctx context.Context, cell guard.Cell) (string, error) {
	if len(cell.Packages) == 0 {
		return "", nil
	}
	full, err := guard.AddCellPackages(s.installed, cell.Packages)
	if err != nil {
		return "", err
	}
	if s.linked.index == cell.Index && slices.EqualFunc(s.installed, full, samePackage) {
		// An earlier attempt of this cell linked it and ended before its frame was written.
		return s.linked.name, nil
	}
	settings := s.s.CheckedSettings
	settings.Packages = full
	env, err := s.b.install(ctx, settings)
	if err != nil {
		return "", err
	}
	// A name no folder of the slot has (the session's environment at its root may hold any).
	dir, err := os.MkdirTemp(s.slot, cellDirPrefix+strconv.Itoa(cell.Index)+"-")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err == nil {
		err = wheels.LinkEnv(env.Dir, dir)
	}
	if err != nil {
		if dir != "" {
			_ = wheels.RemoveTree(dir)
		}
		return "", &guard.IntegrationError{Op: "docker: link cell packages", Err: err}
	}
	s.installed = slices.Clone(full)
	s.packages, s.fetchesTold = env, false
	s.linked.index, s.linked.name = cell.Index, filepath.Base(dir)
	return s.linked.name, nil
}

// samePackage says a and b are the same requirement: name, version, extras and hashes.
func samePackage(a, b guard.Package) bool {
	return a.Name == b.Name && a.Version == b.Version && slices.Equal(a.Extras, b.Extras) && slices.Equal(a.Hashes, b.Hashes)
}
