package codec

import (
	"errors"
	"fmt"
	"log/slog"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"
)

// Metadata written on every encrypted payload. The encoding and key-id names are the ones
// Temporal's own encryption samples use, so Temporal's tools show them sensibly; the cipher value
// is ours and carries the format version.
const (
	MetadataEncoding = converter.MetadataEncoding // "encoding"
	MetadataCipher   = "encryption-cipher"
	MetadataKeyID    = "encryption-key-id"

	EncodingEncrypted = "binary/encrypted"
	CipherAES256GCMv1 = "sandboxflow/aes-256-gcm/v1"
)

// ErrTampered reports an encrypted payload that failed authentication: its bytes or metadata were
// changed, or the key under its id is not the key it was written with.
var ErrTampered = errors.New("authentication failed: the payload was altered, or the key under this id is not the one it was encrypted with")

// ErrMalformed reports a payload marked as encrypted whose metadata or length cannot be ours.
var ErrMalformed = errors.New("malformed encrypted payload")

// UnknownKeyError reports a payload encrypted with a key id that is not in the key ring: the key
// was removed too early, or the reader was given another key file.
type UnknownKeyError struct {
	KeyID string
	// RingEmpty is true when no key ring is configured at all.
	RingEmpty bool
}

func (e *UnknownKeyError) Error() string {
	if e.RingEmpty {
		return fmt.Sprintf("codec: payload encrypted with key id %q, but no key ring is configured; set %s to a key file that holds it", e.KeyID, KeyFileEnv)
	}
	return fmt.Sprintf("codec: payload encrypted with key id %q, which is not in the key ring; add it back to %s", e.KeyID, KeyFileEnv)
}

// Codec is a converter.PayloadCodec that encrypts every payload with AES-256-GCM under the key
// ring's current key and decrypts with whichever key of the ring the payload names.
//
// Encode turns a payload into one whose data is a random 96-bit nonce followed by the AES-GCM
// sealing of the whole original payload (metadata and data, protobuf-encoded); its metadata says
// only EncodingEncrypted, the cipher and the key id, and the key id and cipher are bound as
// additional authenticated data. With an empty ring Encode returns the payloads unchanged.
//
// Decode returns a payload that is not encrypted unchanged, and fails with *UnknownKeyError,
// ErrTampered or ErrMalformed for an encrypted one it cannot open.
type Codec struct {
	ring *KeyRing
}

var _ converter.PayloadCodec = (*Codec)(nil)

// NewCodec returns a Codec over ring. A nil or empty ring writes payloads in the clear.
func NewCodec(ring *KeyRing) *Codec {
	return &Codec{ring: ring}
}

// Encode encrypts each payload with the current key. A payload already encrypted by this codec is
// kept as it is, so encoding twice never nests.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	if c.ring.Len() == 0 {
		return payloads, nil
	}
	id := c.ring.CurrentKeyID()
	aead := c.ring.keys[0].aead
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if isEncrypted(p) && string(p.GetMetadata()[MetadataCipher]) == CipherAES256GCMv1 {
			out[i] = p
			continue
		}
		plain, err := proto.Marshal(p)
		if err != nil {
			return payloads, fmt.Errorf("codec: marshal payload: %w", err)
		}
		sealed := aead.Seal(nil, nil, plain, additionalData(id))
		clear(plain)
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				MetadataEncoding: []byte(EncodingEncrypted),
				MetadataCipher:   []byte(CipherAES256GCMv1),
				MetadataKeyID:    []byte(id),
			},
			Data: sealed,
		}
	}
	return out, nil
}

// Decode decrypts each encrypted payload with the key its metadata names and passes any other
// payload through unchanged.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if !isEncrypted(p) {
			out[i] = p
			continue
		}
		d, err := c.decrypt(p)
		if err != nil {
			return payloads, err
		}
		out[i] = d
	}
	return out, nil
}

func (c *Codec) decrypt(p *commonpb.Payload) (*commonpb.Payload, error) {
	md := p.GetMetadata()
	if cipherName := string(md[MetadataCipher]); cipherName != CipherAES256GCMv1 {
		return nil, fmt.Errorf("codec: payload encrypted with cipher %q, want %q: %w", truncateForMessage(cipherName), CipherAES256GCMv1, ErrMalformed)
	}
	id := string(md[MetadataKeyID])
	if !validKeyID(id) {
		return nil, fmt.Errorf("codec: encrypted payload has no valid %s: %w", MetadataKeyID, ErrMalformed)
	}
	aead, ok := c.ring.lookup(id)
	if !ok {
		return nil, &UnknownKeyError{KeyID: id, RingEmpty: c.ring.Len() == 0}
	}
	if len(p.GetData()) < aead.Overhead() {
		return nil, fmt.Errorf("codec: encrypted payload under key id %q is %d bytes, shorter than nonce and tag: %w", id, len(p.GetData()), ErrMalformed)
	}
	plain, err := aead.Open(nil, nil, p.GetData(), additionalData(id))
	if err != nil {
		return nil, fmt.Errorf("codec: decrypt payload with key id %q: %w", id, ErrTampered)
	}
	var orig commonpb.Payload
	err = proto.Unmarshal(plain, &orig)
	clear(plain)
	if err != nil {
		return nil, fmt.Errorf("codec: decrypted payload under key id %q is not a payload: %w", id, ErrMalformed)
	}
	return &orig, nil
}

// PayloadKeyID returns the id of the key p is encrypted with, and false when p is not encrypted by
// this codec. It reads metadata only, so a check can list the keys a history needs (for example
// the inputs of open runs, before a key is removed) without any key.
func PayloadKeyID(p *commonpb.Payload) (string, bool) {
	if !isEncrypted(p) || string(p.GetMetadata()[MetadataCipher]) != CipherAES256GCMv1 {
		return "", false
	}
	return string(p.GetMetadata()[MetadataKeyID]), true
}

func isEncrypted(p *commonpb.Payload) bool {
	return string(p.GetMetadata()[MetadataEncoding]) == EncodingEncrypted
}

// additionalData binds the format and the key id to the ciphertext: a payload relabelled with
// another id or cipher fails to open.
func additionalData(keyID string) []byte {
	return []byte(CipherAES256GCMv1 + "\x00" + keyID)
}

func truncateForMessage(s string) string {
	const limit = 64
	if len(s) > limit {
		return s[:limit] + "..."
	}
	return s
}

// DataConverter returns Temporal's default data converter with the Codec over ring applied to
// every payload. With a nil or empty ring it writes in the clear but still names the missing key
// when it meets an encrypted payload.
func DataConverter(ring *KeyRing) converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), NewCodec(ring))
}

// ClientOptions returns opts with payload encryption over ring: its DataConverter wrapped with
// the Codec (Temporal's default converter when opts has none) and, when opts sets no
// FailureConverter, one that (while ring holds a key) moves each error's message and stack trace
// into an encrypted payload (Temporal's EncodeCommonAttributes), so error text that quotes code or
// output is not stored in the clear; the failure's type (ToolUsageError, ...) stays readable. The worker and the starter dial with it, so both
// read and write the same history:
//
//	c, err := client.Dial(codec.ClientOptions(client.Options{HostPort: addr}, ring))
//
// A worker takes both converters from its client.
func ClientOptions(opts client.Options, ring *KeyRing) client.Options {
	parent := opts.DataConverter
	if parent == nil {
		parent = converter.GetDefaultDataConverter()
	}
	dc := converter.NewCodecDataConverter(parent, NewCodec(ring))
	opts.DataConverter = dc
	if opts.FailureConverter == nil {
		opts.FailureConverter = temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
			DataConverter:          dc,
			EncodeCommonAttributes: ring.Len() > 0,
		})
	}
	return opts
}

// WarnIfPlaintext logs a WARNING when ring holds no key, and reports whether it did. Call it once
// at start-up in the worker and the starter.
func WarnIfPlaintext(logger *slog.Logger, ring *KeyRing) bool {
	if ring.Len() > 0 {
		return false
	}
	logger.Warn("WARNING: payload encryption is off: Temporal history will hold code, output and env values in the clear; set "+KeyFileEnv+" (or --key-file) to a key file",
		slog.String("key_file_env", KeyFileEnv))
	return true
}
