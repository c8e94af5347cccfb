package devserver

import (
	"fmt"
	"os"
)

// lockDataDir opens (creating it) the lock file at path and takes an exclusive, non-blocking
// lock on it where the system has one (flock): a second dev server on the same DataDir then
// fails with ErrDataDirInUse. The kernel drops the lock when the process dies, so a crash never
// leaves it stale.
func lockDataDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("devserver: open lock file %s: %w", path, err)
	}
	if err := lockFile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("devserver: lock %s: %w", path, err)
	}
	return f, nil
}

// unlockDataDir closes the lock file, which releases the lock.
func unlockDataDir(f *os.File) error {
	if err := f.Close(); err != nil {
		return fmt.Errorf("devserver: release lock %s: %w", f.Name(), err)
	}
	return nil
}
