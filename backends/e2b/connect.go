package e2b

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// Connect protocol framing for streaming calls (connectrpc.com's "Connect" protocol, JSON
// codec): every message is an envelope of one flags byte, a 4-byte big-endian length and the
// message. The last envelope of a response has flagEndStream set and carries the end-of-stream
// JSON: {"error": {"code", "message"}, "metadata": {...}}.
const (
	flagCompressed = 0x01
	flagEndStream  = 0x02
	// maxEnvelopeBytes bounds one message read from envd; data events are far smaller.
	maxEnvelopeBytes = 16 << 20
	// contentTypeConnectJSON is the content type of a streaming call with the JSON codec.
	contentTypeConnectJSON = "application/connect+json"
)

// envelope frames one message.
func envelope(flags byte, msg []byte) []byte {
	out := make([]byte, 5+len(msg))
	out[0] = flags
	binary.BigEndian.PutUint32(out[1:5], uint32(len(msg)))
	copy(out[5:], msg)
	return out
}

// readEnvelope reads one message. io.EOF means the stream ended cleanly between messages; a stream
// cut inside a message is io.ErrUnexpectedEOF.
func readEnvelope(r io.Reader) (flags byte, msg []byte, err error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > maxEnvelopeBytes {
		return 0, nil, fmt.Errorf("connect: message of %d bytes is over %d", n, maxEnvelopeBytes)
	}
	if head[0]&flagCompressed != 0 {
		return 0, nil, fmt.Errorf("connect: compressed message, but no compression was offered")
	}
	msg = make([]byte, n)
	if _, err := io.ReadFull(r, msg); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return head[0], msg, nil
}

// connectError is a Connect error: in an end-of-stream message or a unary error body.
type connectError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *connectError) Error() string { return "connect " + e.Code + ": " + e.Message }

// endStream is the end-of-stream message.
type endStream struct {
	Error *connectError `json:"error,omitempty"`
}

// int64JSON reads a protobuf int64 in its JSON form: a string, or a number.
type int64JSON int64

func (n *int64JSON) UnmarshalJSON(b []byte) error {
	b = bytes.Trim(b, `"`)
	if len(b) == 0 || string(b) == "null" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	*n = int64JSON(v)
	return err
}

// enumJSON reads a protobuf enum in its JSON form: the value's name, or its number.
type enumJSON string

func (e *enumJSON) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*e = enumJSON(s)
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*e = enumJSON(strconv.Itoa(n))
	return nil
}
