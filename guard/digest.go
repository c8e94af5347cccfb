package guard

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// DigestVersion names the canonical encoding. It is the first thing encoded, so a future encoding
// can never collide with this one.
const DigestVersion = "sandboxflow/digest/v1"

// DigestPrefix starts every digest string.
const DigestPrefix = "sha256:"

// Digest returns "sha256:<hex>" over the canonical encoding of c.
func Digest(c *Checked) string {
	sum := sha256.Sum256(CanonicalEncoding(c))
	return DigestPrefix + hex.EncodeToString(sum[:])
}

// CanonicalEncoding encodes everything that decides what runs, in a fixed order, every variable
// part prefixed with its length: the version, language, code, backend, the input files (name and
// bytes, sorted by name), the env (name and value, sorted by name), the effective limits and
// network, egress and secrets, then the packages when there are any, then the image's ID when there is one. Metadata, capture_content and the owner are not part of it: they change nothing that
// runs. Files and Env must be sorted, as Check leaves them.
func CanonicalEncoding(c *Checked) []byte {
	size := 64 + len(c.Language) + len(c.Code) + len(c.Backend)
	for _, f := range c.Files {
		size += 16 + len(f.Name) + len(f.Content)
	}
	for _, e := range c.Env {
		size += 16 + len(e.Name) + len(e.Value)
	}
	b := make([]byte, 0, size)
	b = appendString(b, DigestVersion)
	b = appendString(b, c.Language)
	b = appendString(b, c.Code)
	b = appendString(b, c.Backend)
	b = binary.BigEndian.AppendUint64(b, uint64(len(c.Files)))
	for _, f := range c.Files {
		b = appendString(b, f.Name)
		b = appendBytes(b, f.Content)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(len(c.Env)))
	for _, e := range c.Env {
		b = appendString(b, e.Name)
		b = appendString(b, e.Value)
	}
	for _, v := range []int64{
		int64(c.Limits.Timeout), c.Limits.MaxStdoutBytes, c.Limits.MaxStderrBytes,
		int64(c.Limits.MaxFiles), c.Limits.MaxFileBytes, c.Limits.MaxTotalFileBytes,
	} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	if c.Network {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	// Check leaves Egress in canonical form; a pattern that does not parse is refused before the
	// digest is trusted.
	egress, _ := ParseEgressPatterns(c.Egress)
	b = AppendEgressDigest(b, egress, c.Secrets)
	b = appendPackagesDigest(b, c.Packages)
	return appendImageDigest(b, c.Image)
}

// appendImageDigest appends the image's ID under a tag of its own, when there is one: the
// digests of requests without an image are what they were.
func appendImageDigest(b []byte, image string) []byte {
	if image == "" {
		return b
	}
	b = appendString(b, "sandboxflow/image/v1")
	return appendString(b, image)
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b, s []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}
