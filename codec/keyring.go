package codec

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/sandboxflow/sandboxflow/internal/smallfile"
)

// KeyFileEnv is the environment variable that names the key file the worker and the starter share.
const KeyFileEnv = "SANDBOXFLOW_KEY_FILE"

// DefaultKeyID is the id of a key written on a line of its own, without an "ID:" prefix.
const DefaultKeyID = "default"

// KeySizeBytes is the size of every key: AES-256.
const KeySizeBytes = 32

// MaxKeyIDLen is the longest key id accepted.
const MaxKeyIDLen = 64

// maxKeyFileBytes bounds how much of a key file is read: a key line is under 120 bytes, so this is
// room for thousands of keys and refuses a file named by mistake (a disk image, a log).
const maxKeyFileBytes = 1 << 20

// KeyRing holds the AES-256-GCM keys payloads are encrypted with. The first key is the current one:
// every new payload is encrypted with it. The others only decrypt payloads written before a
// rotation. A KeyRing never prints its key material, and it is safe for concurrent use.
//
// A nil or empty KeyRing means encryption is off: payloads are written in the clear, and an
// encrypted payload cannot be read.
type KeyRing struct {
	keys []ringKey
}

type ringKey struct {
	id   string
	aead cipher.AEAD
}

// KeyFileError reports a key file that cannot be used. It names the file and the line, never the
// key material on it.
type KeyFileError struct {
	// Path is the key file, or "" when the text did not come from a file.
	Path string
	// Line is the 1-based line number, or 0 when the problem is the file as a whole.
	Line int
	// Msg says what is wrong, without key material.
	Msg string
}

func (e *KeyFileError) Error() string {
	where := "key file"
	if e.Path != "" {
		where += " " + e.Path
	}
	if e.Line > 0 {
		where += fmt.Sprintf(" line %d", e.Line)
	}
	return "codec: " + where + ": " + e.Msg
}

// LoadKeyRing reads the key file at path; see ParseKeyRing for its format. The worker and the
// starter call it with the file named by --key-file or KeyFileEnv.
func LoadKeyRing(path string) (*KeyRing, error) {
	if path == "" {
		return nil, &KeyFileError{Msg: "no key file named; set " + KeyFileEnv + " or --key-file"}
	}
	text, err := smallfile.Read(path, maxKeyFileBytes)
	var tooLarge *smallfile.TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return nil, &KeyFileError{Path: path, Msg: fmt.Sprintf("larger than %d bytes; is this the key file?", maxKeyFileBytes)}
	case err != nil:
		return nil, fmt.Errorf("codec: read key file: %w", err)
	}
	ring, err := parseKeyRing(text)
	if err != nil {
		var kfe *KeyFileError
		if errors.As(err, &kfe) {
			kfe.Path = path
		}
		return nil, err
	}
	return ring, nil
}

// ParseKeyRing parses the text of a key file: one key a line, written as ID:BASE64, where BASE64
// is the standard base64 encoding (with padding) of 32 random bytes. The first key is the current
// one. A line holding only base64 is the key with id "default". Ids are 1 to 64 characters of
// A-Z, a-z, 0-9, '.', '_' and '-', and appear once. Blank lines and lines starting with '#' are
// ignored; spaces around a line, an id or a key are trimmed. A text with no key is an error.
func ParseKeyRing(text []byte) (*KeyRing, error) {
	return parseKeyRing(text)
}

func parseKeyRing(text []byte) (*KeyRing, error) {
	ring := &KeyRing{}
	firstLine := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), maxKeyFileBytes)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, encoded := DefaultKeyID, line
		if before, after, found := strings.Cut(line, ":"); found {
			id, encoded = strings.TrimSpace(before), strings.TrimSpace(after)
		}
		// An invalid id is never printed: it may be key material written in the wrong place.
		if !validKeyID(id) {
			return nil, &KeyFileError{Line: lineNo, Msg: fmt.Sprintf("key id must be 1 to %d characters of A-Z a-z 0-9 . _ - (write lines as ID:BASE64)", MaxKeyIDLen)}
		}
		if prev, dup := firstLine[id]; dup {
			return nil, &KeyFileError{Line: lineNo, Msg: fmt.Sprintf("key id %q appears again (first on line %d); ids must be unique", id, prev)}
		}
		key, err := base64.StdEncoding.Strict().DecodeString(encoded)
		if err != nil {
			// The decoder's message is not shown: it would point into the key.
			return nil, &KeyFileError{Line: lineNo, Msg: fmt.Sprintf("key %q is not valid base64 (standard alphabet with padding)", id)}
		}
		if len(key) != KeySizeBytes {
			return nil, &KeyFileError{Line: lineNo, Msg: fmt.Sprintf("key %q is %d bytes; want %d (AES-256)", id, len(key), KeySizeBytes)}
		}
		aead, err := newAEAD(key)
		clear(key)
		if err != nil {
			return nil, fmt.Errorf("codec: key file line %d: %w", lineNo, err)
		}
		firstLine[id] = lineNo
		ring.keys = append(ring.keys, ringKey{id: id, aead: aead})
	}
	if err := sc.Err(); err != nil {
		return nil, &KeyFileError{Line: lineNo + 1, Msg: "line too long"}
	}
	if len(ring.keys) == 0 {
		return nil, &KeyFileError{Msg: "holds no key; write one line as ID:BASE64 of 32 random bytes"}
	}
	return ring, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("aes: %w", err)
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, fmt.Errorf("gcm: %w", err)
	}
	return aead, nil
}

func validKeyID(id string) bool {
	if id == "" || len(id) > MaxKeyIDLen {
		return false
	}
	for _, c := range []byte(id) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// GenerateKeyLine returns a new key file line, "ID:BASE64" with 32 bytes from crypto/rand, for an
// operator to put first in the key file when rotating.
func GenerateKeyLine(id string) (string, error) {
	if !validKeyID(id) {
		return "", fmt.Errorf("codec: key id %q: must be 1 to %d characters of A-Z a-z 0-9 . _ -", id, MaxKeyIDLen)
	}
	key := make([]byte, KeySizeBytes)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("codec: random key: %w", err)
	}
	return id + ":" + base64.StdEncoding.EncodeToString(key), nil
}

// Len returns the number of keys; zero (also for a nil KeyRing) means encryption is off.
func (r *KeyRing) Len() int {
	if r == nil {
		return 0
	}
	return len(r.keys)
}

// CurrentKeyID returns the id of the key new payloads are encrypted with, or "" when encryption
// is off.
func (r *KeyRing) CurrentKeyID() string {
	if r.Len() == 0 {
		return ""
	}
	return r.keys[0].id
}

// KeyIDs returns the ids of all keys, the current one first.
func (r *KeyRing) KeyIDs() []string {
	ids := make([]string, 0, r.Len())
	for i := range r.Len() {
		ids = append(ids, r.keys[i].id)
	}
	return ids
}

func (r *KeyRing) lookup(id string) (cipher.AEAD, bool) {
	for i := range r.Len() {
		if r.keys[i].id == id {
			return r.keys[i].aead, true
		}
	}
	return nil, false
}

// String names the key ids, never the keys.
func (r *KeyRing) String() string {
	if r.Len() == 0 {
		return "key ring (empty: encryption off)"
	}
	return fmt.Sprintf("key ring [%s] (current %s)", strings.Join(r.KeyIDs(), " "), r.CurrentKeyID())
}

// LogValue makes slog print the key ids, never the keys.
func (r *KeyRing) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("current_key_id", r.CurrentKeyID()),
		slog.Any("key_ids", r.KeyIDs()),
	)
}
