package docker

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/wheeltest"
	"github.com/sandboxflow/sandboxflow/wheels"
)

func withLock(c guard.Checked, lock string) guard.Checked {
	pkgs, err := guard.ParseLock(lock)
	if err != nil {
		panic(err)
	}
	c.Packages = pkgs
	c.Digest = guard.Digest(&c)
	return c
}

// A host without an index refuses a request with packages before any container; a refused lock
// creates none either; a verified one is mounted read-only at PackagesMount, outside /work.
func TestPackagesReachTheContainerSpec(t *testing.T) {
	ix := wheeltest.NewIndex(t)
	w := ix.AddWheel(t, wheeltest.Wheel{Name: "beta", Version: "2.1", Files: map[string]string{"beta.py": ""}})
	lock := wheeltest.Line("beta", "2.1", w)

	f := newFake()
	_, err := fakeBackend(t, f, Config{}).Run(context.Background(), withLock(testChecked("print(1)"), lock))
	if guard.TypeOf(err) != guard.TypeConfigError || len(f.created) != 0 {
		t.Fatalf("no index: %v, %d containers; want a ConfigError and none", err, len(f.created))
	}

	in, err := wheels.New(wheels.Config{Index: ix.URL(), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	f = newFake()
	b := fakeBackend(t, f, Config{Packages: in})
	_, err = b.Run(context.Background(), withLock(testChecked("print(1)"), "beta==2.1 --hash=sha256:"+strings.Repeat("0", 64)))
	var pe *guard.PackageError
	if !errors.As(err, &pe) || pe.Reason != guard.PackageHashMismatch || len(f.created) != 0 {
		t.Fatalf("a wrong hash: %v, %d containers; want a hash_mismatch and none", err, len(f.created))
	}
	f.stdout = okResult(t, map[string]any{"stdout": []byte("1\n")})
	res, err := b.Run(context.Background(), withLock(testChecked("print(1)"), lock))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.created) != 1 || f.created[0].ReadOnlyBinds[PackagesMount] == "" || res.Packages == nil || len(res.Packages.Installed) != 1 {
		t.Fatalf("specs %+v, packages %+v; want one container mounting the environment at %s", f.created, res.Packages, PackagesMount)
	}
	if _, onTmpfs := f.created[0].Tmpfs[PackagesMount]; onTmpfs {
		t.Error("the package folder is a tmpfs the code could write")
	}
}
