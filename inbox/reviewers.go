package inbox

import (
	"os"
	"slices"
	"sync"
	"time"

	"github.com/sandboxflow/sandboxflow/approval"
)

// reviewersFile is the reviewers file, read again whenever its size or modification time
// changes. A file that is missing or does not parse lists nobody (fail closed).
type reviewersFile struct {
	path string
	// origin is the inbox's: the one origin passkey assertions are accepted from.
	origin string

	mu      sync.Mutex
	modTime time.Time
	size    int64
	loaded  bool
	current *approval.Reviewers
	err     error
}

// get returns the reviewers now in the file, or nil and why there are none.
func (f *reviewersFile) get() (*approval.Reviewers, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	if err != nil {
		f.loaded, f.current, f.err = false, nil, err
		return nil, err
	}
	if f.loaded && fi.ModTime().Equal(f.modTime) && fi.Size() == f.size {
		return f.current, f.err
	}
	f.current, f.err = approval.LoadReviewers(f.path)
	if f.err == nil {
		f.current, f.err = f.current.WithPasskeyOrigin(f.origin)
	}
	f.loaded, f.modTime, f.size = true, fi.ModTime(), fi.Size()
	return f.current, f.err
}

// lists reports whether the key with fingerprint is still in the file for principal.
func (f *reviewersFile) lists(principal, fingerprint string) bool {
	r, err := f.get()
	if err != nil || r == nil {
		return false
	}
	for _, k := range r.Keys() {
		if k.Fingerprint != fingerprint {
			continue
		}
		for _, p := range k.Principals {
			if p == principal {
				return true
			}
		}
	}
	return false
}

// keysOf counts the keys the file lists for principal (0 when it cannot be read).
func (f *reviewersFile) keysOf(principal string) int {
	r, err := f.get()
	if err != nil || r == nil {
		return 0
	}
	n := 0
	for _, k := range r.Keys() {
		if slices.Contains(k.Principals, principal) {
			n++
		}
	}
	return n
}
