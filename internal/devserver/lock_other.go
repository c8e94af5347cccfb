//go:build !unix

package devserver

import (
	"fmt"
	"os"
)

// lockDataDir only creates the lock file on systems without flock: there a
// second dev server on the same DataDir is not detected.
func lockDataDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("devserver: open lock file %s: %w", path, err)
	}
	return f, nil
}

func unlockDataDir(f *os.File) error {
	if err := f.Close(); err != nil {
		return fmt.Errorf("devserver: release lock %s: %w", f.Name(), err)
	}
	return nil
}
