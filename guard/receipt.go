package guard

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// Receipt is a sandbox host's signed account of one run or cell: a canonical statement (package
// receipt writes and reads it) and the host's SSHSIG signature over it, in a namespace of its own.
// It travels in the result, and so in the run's history.
type Receipt struct {
	// Statement is the canonical statement the host signed (receipt.Statement's bytes).
	Statement string `json:"statement"`
	// Signature is the armored SSHSIG over Statement, namespace "sandboxflow-receipt".
	Signature string `json:"signature"`
}

// StreamMeasure is the length and SHA-256 (lower-case hex) of bytes.
type StreamMeasure struct {
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// MeasureBytes returns b's length and SHA-256.
func MeasureBytes(b []byte) StreamMeasure {
	sum := sha256.Sum256(b)
	return StreamMeasure{Bytes: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}
}

// FileMeasure is one produced file as the backend returned it, before the guard's limits.
type FileMeasure struct {
	Name string        `json:"name"`
	Size StreamMeasure `json:"size"`
}

// Measured is what the sandbox host measured of a run beyond its result, for its receipt: each
// output stream whole, as the code wrote it (before any cap), and each produced file as the
// backend returned it (before Enforce dropped any). It never leaves the host in this form (it has
// no JSON): the receipt signs it.
type Measured struct {
	// Stdout and Stderr are the whole streams as the code wrote them; nil when the backend
	// measured none (the HTTP and callable backends learn only the kept output).
	Stdout, Stderr *StreamMeasure
	// Files are the produced files the backend returned, in its order, set by Enforce.
	Files []FileMeasure
	// Runtime is the container runtime that ran the code (runc, runsc), for backends that have
	// one.
	Runtime string
}

// measureFiles measures files as a backend returned them.
func measureFiles(files []File) []FileMeasure {
	out := make([]FileMeasure, 0, len(files))
	for _, f := range files {
		out = append(out, FileMeasure{Name: f.Name, Size: MeasureBytes(f.Content)})
	}
	return out
}

// TypeReceiptRefused is the Temporal type name of a ReceiptRefused error.
const TypeReceiptRefused = "ReceiptRefused"

// ReceiptRefused reports that a run's result was refused because its receipt is missing or does
// not verify against the sandbox hosts' keys the check recorded, or because the result differs
// from what the receipt signs (a namespace writer completed the sandbox activity with output of
// its own). The approval was used; the code's real outcome is unknown. It is never retried.
type ReceiptRefused struct {
	// Field names what failed: "receipt" (none), "signature", "host_key", a statement field
	// ("workflow_id", "digest", ...) or a result field ("stdout", "files[2]", ...).
	Field string
	Msg   string
	Err   error
}

func (e *ReceiptRefused) Error() string {
	msg := fmt.Sprintf("result refused (%s): %s", e.Field, e.Msg)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *ReceiptRefused) Unwrap() error { return e.Err }

// ErrNoReceipt is the cause of a ReceiptRefused for a result that carries no receipt.
var ErrNoReceipt = errors.New("the result carries no receipt")

// TextOf returns b as the result's JSON carries it (valid UTF-8, invalid bytes replaced by
// U+FFFD) and whether bytes had to be replaced (or wasBinary already said so).
func TextOf(b []byte, wasBinary bool) (string, bool) { return textOf(b, wasBinary) }
