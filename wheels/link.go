package wheels

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// SlotsDir is the folder under the cache where sandboxes' package slots live: empty folders a
// warm sandbox mounts read-only ahead of its run, into which the run's environment is linked
// when the run that takes it has packages (LinkEnv).
func (in *Installer) SlotsDir() string { return filepath.Join(in.cfg.CacheDir, "slots") }

// LinkEnv makes dst, an empty folder, hold the environment env (an Env's Dir): its files
// hard-linked (copied when a link cannot be made), its folders made and then made read-only.
// It reads nothing of the files, so it takes about a millisecond a hundred files.
func LinkEnv(env, dst string) error {
	err := filepath.WalkDir(env, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(env, p)
		if err != nil || rel == "." {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(target, 0o755)
		case d.Type().IsRegular():
			if os.Link(p, target) == nil {
				return nil
			}
			return copyFile(p, target)
		}
		return fmt.Errorf("%s is not a regular file", p)
	})
	if err != nil {
		return fmt.Errorf("wheels: link environment into %s: %w", dst, err)
	}
	return makeReadOnly(dst)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

// RemoveTree removes dir and everything under it, read-only folders included.
func RemoveTree(dir string) error {
	_ = makeWritable(dir)
	return os.RemoveAll(dir)
}
