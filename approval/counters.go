package approval

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// ReasonCounterReplayed: a passkey's signature counter is in use (not zero) and did not grow
// since the last assertion this verifier accepted from it: the assertion is an old one presented
// again, or the passkey was cloned.
const ReasonCounterReplayed Reason = "counter_replayed"

// maxCountersBytes bounds a counters file.
const maxCountersBytes = 4 << 20

// Counters keeps, per passkey, the signature counter of the last assertion a verifier accepted
// and what it signed, in a JSON file of the verifier's own (the inbox's, a sandbox host's), so
// that a cloned authenticator or an assertion presented again is noticed across runs and
// restarts. Each verifier keeps its own file: a counter is a property of what that verifier has
// seen, and no record a namespace writer can write (a run's history) is trusted for it. Use one
// Counters per file in a process; processes sharing a file take a lock on it.
type Counters struct {
	path string
	mu   sync.Mutex
	mem  *countersJSON // the state when path is empty
}

// NewCounters returns the counters kept in path (made when first needed, mode 0600), or with
// an empty path in this value's memory only, forgotten when the process ends.
func NewCounters(path string) *Counters { return &Counters{path: path} }

// countersJSON is the file's form.
type countersJSON struct {
	Version  int                      `json:"version"`
	Passkeys map[string]counterRecord `json:"passkeys"`
}

type counterRecord struct {
	Counter uint32 `json:"counter"`
	// Challenge is what the accepted assertion signed, base64url.
	Challenge string `json:"challenge"`
}

// Advance accepts v, a verified decision or sign-in, when its passkey's signature counter grew
// since the last one accepted, and records it. An authenticator that always reports 0 (many
// passkeys synced between devices do) is accepted every time. The same assertion presented again
// (same counter, same challenge: the sandbox host's fresh activity after a failure from before
// the start) is accepted; any other assertion whose counter did not grow is refused with
// ReasonCounterReplayed. Decisions not made with a passkey are accepted unrecorded.
func (c *Counters) Advance(v Verified) error {
	if v.Method != MethodWebAuthn {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path == "" {
		if c.mem == nil {
			c.mem = &countersJSON{Version: 1, Passkeys: map[string]counterRecord{}}
		}
		return advance(c.mem, v, func(*countersJSON) error { return nil })
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o700); err != nil {
		return fmt.Errorf("approval: passkey counters: %w", err)
	}
	lock, err := os.OpenFile(c.path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("approval: passkey counters: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("approval: passkey counters: lock %s: %w", lock.Name(), err)
	}
	state, err := c.read()
	if err != nil {
		return err
	}
	return advance(state, v, c.write)
}

// advance applies Advance's rule to state and saves it when v is recorded.
func advance(state *countersJSON, v Verified, save func(*countersJSON) error) error {
	last, seen := state.Passkeys[v.Fingerprint]
	challenge := v.Challenge
	switch {
	case !seen, v.Counter > last.Counter:
	case v.Counter == 0 && last.Counter == 0:
		return nil
	case v.Counter == last.Counter && challenge == last.Challenge:
		return nil
	default:
		return refuse(ReasonCounterReplayed, "passkey %s: signature counter %d, but an assertion with counter %d was already accepted; an old assertion presented again, or a cloned authenticator", v.Fingerprint, v.Counter, last.Counter)
	}
	state.Passkeys[v.Fingerprint] = counterRecord{Counter: v.Counter, Challenge: challenge}
	return save(state)
}

func (c *Counters) read() (*countersJSON, error) {
	b, err := os.ReadFile(c.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &countersJSON{Version: 1, Passkeys: map[string]counterRecord{}}, nil
	case err != nil:
		return nil, fmt.Errorf("approval: passkey counters: %w", err)
	case len(b) > maxCountersBytes:
		return nil, fmt.Errorf("approval: passkey counters: %s is larger than %d bytes", c.path, maxCountersBytes)
	}
	// Read into a zero value and require what write writes (the version and the passkeys
	// object): "null", "{}" or another program's JSON must not read as a file that saw no
	// passkey, which would accept every cloned or replayed assertion once.
	var state countersJSON
	if err := json.Unmarshal(b, &state); err != nil {
		return nil, fmt.Errorf("approval: passkey counters: %s is not a counters file: %w", c.path, err)
	}
	if state.Version != 1 || state.Passkeys == nil {
		return nil, fmt.Errorf("approval: passkey counters: %s is not a counters file: want version 1 and its passkeys", c.path)
	}
	return &state, nil
}

// write replaces the file whole (a new file renamed over it), so a crash leaves the old or the
// new state.
func (c *Counters) write(state *countersJSON) error {
	b, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("approval: passkey counters: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), filepath.Base(c.path)+".*")
	if err != nil {
		return fmt.Errorf("approval: passkey counters: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("approval: passkey counters: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("approval: passkey counters: sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("approval: passkey counters: %w", err)
	}
	if err := os.Rename(tmp.Name(), c.path); err != nil {
		return fmt.Errorf("approval: passkey counters: %w", err)
	}
	return nil
}
