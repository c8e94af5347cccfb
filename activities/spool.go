package activities

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/proto"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// The host's spool (issue 44): what a sandbox host needs, besides the sandbox, to sign and
// deliver the result of a run whose worker process died while the code ran. Every worker that
// runs sandboxes writes one entry per run when the code is sent and removes it when the activity
// answers; a worker that starts on the same host adopts the entries of the workers that are gone
// (adopt.go).
//
// Layout under Config.SpoolDir (0700): ID.lock, a file each live worker keeps flock'ed for its
// whole life (made under a temporary name and renamed once locked, so that no other worker ever
// sees it unlocked while its maker lives), and ID/, its entries, one JSON file per run. A lock
// that can be taken is a worker that is gone (the kernel drops a process's locks when it dies,
// however it died).

// spooled is one run's spool entry: never the code, files, env or secrets' values, only what
// the receipt and the late result need.
type spooled struct {
	Namespace string      `json:"namespace"`
	Owner     guard.Owner `json:"owner"`
	// Sandbox is the backend's name for the run's sandbox (guard.Prepared.SandboxID), or "".
	Sandbox  string         `json:"sandbox,omitempty"`
	Digest   string         `json:"digest"`
	Backend  string         `json:"backend"`
	Limits   guard.Limits   `json:"limits"`
	Egress   []string       `json:"egress,omitempty"`
	Secrets  []string       `json:"secrets,omitempty"`
	Metadata guard.Metadata `json:"metadata"`
	// Claim is the commitment of the host's claim on the approval.
	Claim      string           `json:"claim"`
	ApprovalID string           `json:"approval_id"`
	Reviewer   string           `json:"reviewer"`
	Approvals  []guard.Approval `json:"approvals,omitempty"`
	Edit       *guard.Edit      `json:"edit,omitempty"`
	Started    time.Time        `json:"started"`
	// Stage is stageClaimed from before the claim is sent until right before the code is sent,
	// then stageSent ("" in entries written before stages: sent). ClaimSecret is the claim's
	// secret, with which an adopting worker releases the claim of code that never went.
	Stage       string `json:"stage,omitempty"`
	ClaimSecret string `json:"claim_secret,omitempty"`
}

// The stages of a run's spool entry (runSpool).
const (
	stageClaimed = "claimed"
	stageSent    = "sent"
)

// checked is the part of the run's request an Adopter needs.
func (e spooled) checked() guard.Checked {
	return guard.Checked{Digest: e.Digest, Owner: e.Owner, CheckedSettings: guard.CheckedSettings{
		Limits: e.Limits, Egress: e.Egress, Backend: e.Backend, Secrets: e.Secrets, Metadata: e.Metadata}}
}

// spool is this worker's part of the spool directory.
type spool struct {
	root string
	id   string
	lock *os.File // root/id.lock, flock'ed
}

// openSpool takes this worker's part of the spool under root, creating root when needed.
func openSpool(root string) (*spool, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("activities: spool: %v", err)}
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	s := &spool{root: root, id: hex.EncodeToString(b[:])}
	tmp := filepath.Join(root, ".new-"+s.id)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("activities: spool: %v", err)}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("activities: spool: lock %s: %w", tmp, err)
	}
	if err := os.Mkdir(filepath.Join(root, s.id), 0o700); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("activities: spool: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(root, s.id+".lock")); err != nil {
		f.Close()
		return nil, fmt.Errorf("activities: spool: %w", err)
	}
	s.lock = f
	return s, nil
}

// entryName is the file name of the entry of the run of owner o.
func entryName(o guard.Owner) string {
	h := sha256.Sum256([]byte(o.WorkflowID + "\x00" + o.RunID + "\x00" + o.ActivityID))
	return hex.EncodeToString(h[:16]) + ".json"
}

// latePath is where the late result of the entry at path is kept (putLate).
func latePath(entry string) string {
	return strings.TrimSuffix(entry, ".json") + ".late"
}

// put writes e durably and returns what removes it, with its late result if one was kept.
func (s *spool) put(e spooled) (drop func(), err error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(s.root, s.id, entryName(e.Owner))
	if err := writeQuickly(path, b); err != nil {
		return nil, fmt.Errorf("activities: spool the run: %w", err)
	}
	return func() {
		os.Remove(latePath(path))
		os.Remove(path)
	}, nil
}

// putLate keeps the late result of the run of owner o, the signal's input as the worker's data
// converter encoded it (its payload codec too), next to the run's entry: a worker that adopts
// the entry sends it as it is.
func (s *spool) putLate(o guard.Owner, input *commonpb.Payloads) error {
	b, err := proto.Marshal(input)
	if err != nil {
		return err
	}
	return writeDurably(latePath(filepath.Join(s.root, s.id, entryName(o))), b)
}

// readLate reads the late result kept for the entry at path; nil when none was kept.
func readLate(entry string) (*commonpb.Payloads, error) {
	b, err := os.ReadFile(latePath(entry))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p commonpb.Payloads
	if err := proto.Unmarshal(b, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// writeQuickly writes b to path: to a temporary file renamed into place, not synced. It survives
// its process's death (the page cache stays), not its machine's.
func writeQuickly(path string, b []byte) error { return writeReplacing(path, b, false) }

// writeDurably writes b to path: written to a temporary file, synced, renamed into place, and
// the rename synced.
func writeDurably(path string, b []byte) error { return writeReplacing(path, b, true) }

// writeReplacing writes b to a temporary file beside path and renames it into place, syncing
// the file and the rename when sync is set.
func writeReplacing(path string, b []byte, sync bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".new-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	if sync {
		syncDir(dir)
	}
	return nil
}

// syncDir makes a rename in dir durable; a failure only weakens that.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// orphan is the spool of a worker that is gone, locked by this one while it adopts it.
type orphan struct {
	dir      string
	lock     *os.File
	entries  []string // paths of run entries
	sessions []string // paths of session entries (adoptsession.go)
}

// orphans returns the spools of the workers that are gone, each locked until done is called.
func (s *spool) orphans() ([]*orphan, error) {
	names, err := os.ReadDir(s.root)
	if err != nil {
		return nil, err
	}
	var out []*orphan
	var errs []error
	for _, n := range names {
		id, ok := strings.CutSuffix(n.Name(), ".lock")
		if !ok || id == s.id || n.IsDir() {
			continue
		}
		o, err := s.takeOrphan(id)
		if err != nil {
			errs = append(errs, err)
		} else if o != nil {
			out = append(out, o)
		}
	}
	return out, errors.Join(errs...)
}

// takeOrphan locks the spool id when its worker is gone (nil, nil when it lives) and lists its
// entries.
func (s *spool) takeOrphan(id string) (*orphan, error) {
	f, err := os.OpenFile(filepath.Join(s.root, id+".lock"), os.O_RDWR, 0)
	if err != nil {
		return nil, nil // taken by another worker meanwhile
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, nil // its worker lives, or another one adopts it
	}
	o := &orphan{dir: filepath.Join(s.root, id), lock: f}
	entries, err := filepath.Glob(filepath.Join(o.dir, "*.json"))
	if err != nil {
		f.Close()
		return nil, err
	}
	o.entries = entries
	if o.sessions, err = filepath.Glob(filepath.Join(o.dir, "*.session")); err != nil {
		f.Close()
		return nil, err
	}
	return o, nil
}

// done removes the orphan's spool (its entries were handled) and its lock.
func (o *orphan) done() {
	os.RemoveAll(o.dir)
	os.Remove(o.lock.Name())
	o.lock.Close()
}

// readEntry reads one spool entry.
func readEntry(path string) (spooled, error) {
	var e spooled
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &e)
	}
	return e, err
}
