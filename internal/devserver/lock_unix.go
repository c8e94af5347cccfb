//go:build unix

package devserver

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDataDir takes an exclusive, non-blocking flock on path. The kernel
// drops the lock when the process dies, so a crash never leaves it stale.
func lockDataDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("devserver: open lock file %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("devserver: lock %s: %w", path, ErrDataDirInUse)
		}
		return nil, fmt.Errorf("devserver: lock %s: %w", path, err)
	}
	return f, nil
}

func unlockDataDir(f *os.File) error {
	// Closing the file releases the flock.
	if err := f.Close(); err != nil {
		return fmt.Errorf("devserver: release lock %s: %w", f.Name(), err)
	}
	return nil
}
