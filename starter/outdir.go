package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"

	"github.com/sandboxflow/sandboxflow/guard"
)

// `starter result --out DIR` writes the produced files and the outputs with data into DIR. The
// code chose the files' names and wrote every byte: a name is written only once it passes the
// product's own check (guard.CheckFileName: relative, clean, no "..", nothing invisible), and
// every path is opened through an os.Root of DIR, which never leaves it; a symlink already on
// the way (planted by whoever could write to DIR) is refused, never followed, and a file is
// created with O_EXCL, so that one planted between the check and the write is refused too.
// Nothing is written unless every name passes; an existing file is refused unless --force.

// outputExt is the extension --out gives an output of each MIME type (guard.OutputMIMEs).
var outputExt = map[string]string{
	guard.MIMEPNG:   "png",
	guard.MIMEJPEG:  "jpg",
	guard.MIMESVG:   "svg",
	guard.MIMEHTML:  "html",
	guard.MIMEText:  "txt",
	guard.MIMEJSON:  "json",
	guard.MIMETable: "table.json",
}

// outFile is one file --out writes: its name in DIR, its size, and what it is ("file", or
// "output 2, figure, image/png").
type outFile struct {
	Name string
	Size int64
	What string
	data []byte
}

// outWritten is what --out wrote, and where.
type outWritten struct {
	Dir   string
	Files []outFile
}

// planOut names everything res has to write: each produced file by its own name, once it
// passes guard.CheckFileName, and each output with data as output-<index>-<n>.<ext>, n counting
// the representations of one shown thing from 1. Names that collide (equal but for case or
// Unicode normalization, or a file inside another) are refused.
func planOut(res guard.Result) ([]outFile, error) {
	var plan []outFile
	names := []string{}
	for _, f := range res.Files {
		if err := guard.CheckFileName(f.Name); err != nil {
			return nil, fmt.Errorf("starter: --out: produced file %q is not written: %w", f.Name, err)
		}
		plan = append(plan, outFile{Name: f.Name, Size: int64(len(f.Content)), What: "file", data: f.Content})
		names = append(names, f.Name)
	}
	last, n := 0, 0
	for _, o := range res.Outputs {
		if o.Index != last {
			last, n = o.Index, 0
		}
		n++
		if o.LeftOut {
			continue
		}
		ext, ok := outputExt[o.MIME]
		if !ok {
			return nil, fmt.Errorf("starter: --out: output %d has MIME type %q, which no output may have", o.Index, o.MIME)
		}
		name := fmt.Sprintf("output-%d-%d.%s", o.Index, n, ext)
		plan = append(plan, outFile{Name: name, Size: int64(len(o.Data)), What: fmt.Sprintf("output %d, %s, %s", o.Index, o.Source, o.MIME), data: o.Data})
		names = append(names, name)
	}
	if err := guard.CheckFileNames(names); err != nil {
		return nil, fmt.Errorf("starter: --out: %w", err)
	}
	return plan, nil
}

// writeOut writes res's files and outputs into dir (made when missing), refusing every name
// that is unsafe or in the way before it writes any; force lets it replace existing regular
// files.
func writeOut(dir string, res guard.Result, force bool) (*outWritten, error) {
	plan, err := planOut(res)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("starter: --out: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("starter: --out: %w", err)
	}
	defer root.Close()
	for _, f := range plan {
		if err := checkOutPath(root, f.Name, force); err != nil {
			return nil, err
		}
	}
	out := &outWritten{Dir: dir}
	for _, f := range plan {
		if err := writeOutFile(root, f, force); err != nil {
			return out, fmt.Errorf("%w (%d of %d written before)", err, len(out.Files), len(plan))
		}
		out.Files = append(out.Files, f)
	}
	return out, nil
}

// checkOutPath refuses name when something in root is in its way: a symlink anywhere on its
// path, a file where a folder goes, a folder where the file goes, or an existing file unless
// force.
func checkOutPath(root *os.Root, name string, force bool) error {
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		fi, err := root.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return fmt.Errorf("starter: --out: %s: %w", name, err)
		case !fi.IsDir():
			return fmt.Errorf("starter: --out: %s: %s in %s is a %s, not a folder: refused (never followed)", name, dir, root.Name(), kindOf(fi))
		}
	}
	fi, err := root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("starter: --out: %s: %w", name, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("starter: --out: %s in %s is a %s: refused (never followed or replaced)", name, root.Name(), kindOf(fi))
	case !force:
		return fmt.Errorf("starter: --out: %s exists in %s: refused (--force replaces existing files)", name, root.Name())
	}
	return nil
}

func kindOf(fi fs.FileInfo) string {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return "symlink"
	case fi.IsDir():
		return "folder"
	}
	return "special file"
}

// writeOutFile writes f under root: its folders made one by one, each checked to be a folder
// and no symlink; the file created new (O_EXCL: never through a symlink), after removing the
// regular file there when force.
func writeOutFile(root *os.Root, f outFile, force bool) error {
	if err := checkOutPath(root, f.Name, force); err != nil {
		return err
	}
	var dirs []string
	for dir := path.Dir(f.Name); dir != "."; dir = path.Dir(dir) {
		dirs = append([]string{dir}, dirs...)
	}
	for _, dir := range dirs {
		if err := root.Mkdir(dir, 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("starter: --out: %w", err)
		}
	}
	if err := checkOutPath(root, f.Name, force); err != nil {
		return err
	}
	if force {
		if err := root.Remove(f.Name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("starter: --out: %w", err)
		}
	}
	file, err := root.OpenFile(f.Name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return fmt.Errorf("starter: --out: %w", err)
	}
	if _, err := file.Write(f.data); err != nil {
		file.Close()
		return fmt.Errorf("starter: --out: write %s: %w", f.Name, err)
	}
	if err := file.Close(); err != nil {
		return fmt.Errorf("starter: --out: write %s: %w", f.Name, err)
	}
	return nil
}
