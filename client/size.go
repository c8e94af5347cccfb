package client

import (
	"fmt"

	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// Temporal's limits on what one call may carry, with the server's default configuration: larger
// payloads end in "Blob data size exceeds limit", larger messages in gRPC's ResourceExhausted.
const (
	// MaxPayloadBytes is the server's blob size limit per payload (limit.blobSize.error).
	MaxPayloadBytes = 2 << 20
	// MaxMessageBytes is gRPC's default limit on one message.
	MaxMessageBytes = 4 << 20
)

// checkPayloadSize reports a ToolUsageError when args, encoded with dc as Temporal will encode
// them, exceed MaxPayloadBytes per payload or MaxMessageBytes together. rawBytes is a cheap lower
// bound of the encoded size (the bytes the caller holds): over the limit, nothing is encoded.
func checkPayloadSize(dc converter.DataConverter, what string, rawBytes int, args ...any) error {
	if rawBytes > MaxPayloadBytes {
		return &guard.ToolUsageError{Msg: fmt.Sprintf("%s holds at least %d bytes, over Temporal's payload limit of %d bytes (2 MiB)", what, rawBytes, MaxPayloadBytes)}
	}
	payloads, err := dc.ToPayloads(args...)
	if err != nil {
		return fmt.Errorf("client: encode %s: %w", what, err)
	}
	for _, p := range payloads.GetPayloads() {
		if n := proto.Size(p); n > MaxPayloadBytes {
			return &guard.ToolUsageError{Msg: fmt.Sprintf("%s encodes to %d bytes, over Temporal's payload limit of %d bytes (2 MiB)", what, n, MaxPayloadBytes)}
		}
	}
	if n := proto.Size(payloads); n > MaxMessageBytes {
		return &guard.ToolUsageError{Msg: fmt.Sprintf("%s encodes to %d bytes, over Temporal's message limit of %d bytes (4 MiB)", what, n, MaxMessageBytes)}
	}
	return nil
}

// requestBytes is the number of bytes a request carries in code, files and env.
func requestBytes(req guard.Request) int {
	n := len(req.Code)
	for name, b := range req.Files {
		n += len(name) + len(b)
	}
	for name, v := range req.Env {
		n += len(name) + len(v)
	}
	return n
}

// CheckRequest refuses, without any connection, a request that Start would refuse before
// sending: text that is not UTF-8, or a request over Temporal's payload limits in the clear (a
// key ring adds a little; Start checks again with the client's converter).
func CheckRequest(req guard.Request) error {
	if err := guard.CheckEncodable(req); err != nil {
		return err
	}
	return checkPayloadSize(converter.GetDefaultDataConverter(), "the request", requestBytes(req), contract.Input{Request: req})
}
