package contract

// Live output (issue 29). While the code runs, the sandbox activity (SandboxRun, and SessionCell
// for a session's cell) records LiveOutput as its heartbeat details: any client reads them with
// DescribeWorkflowExecution (the pending activity's heartbeat details, decoded by the client's
// data converter, so the payload codec applies to them like to every other payload) and nothing
// else. A reader keeps, per stream, the offset up to which it has printed; a chunk that starts past
// it means the reader missed bytes (the heartbeats between two reads held more than one chunk's
// worth), which it reports as skipped. The result still holds all output up to the caps.

// MaxLiveChunkBytes bounds the bytes of output (both streams together) in one LiveOutput: 12 KiB,
// whose base64 in the JSON payload is at most MaxLiveEncodedBytes (16 KiB), so that every
// heartbeat's details are at most 16 KiB and a small header.
const MaxLiveChunkBytes = 12 << 10

// MaxLiveEncodedBytes is the most the chunk bytes of one LiveOutput take in its JSON encoding.
const MaxLiveEncodedBytes = 16 << 10

// LiveOutput is one heartbeat's view of a running sandbox's output: the newest bytes of each
// stream, at most MaxLiveChunkBytes in all, and where they sit in the stream.
type LiveOutput struct {
	// Seq counts the heartbeats that carried output details, from 1.
	Seq int64 `json:"seq"`
	// Cell is the session cell's index (SessionCell), 0 for a run (SandboxRun).
	Cell int `json:"cell,omitempty"`
	// Stdout and Stderr are the newest bytes of each stream.
	Stdout LiveChunk `json:"stdout"`
	Stderr LiveChunk `json:"stderr"`
}

// LiveChunk is the newest part of one stream: Bytes are the stream's bytes from Offset on, up to
// Total, the bytes the stream has kept so far (Offset + len(Bytes) == Total). The stream counts
// only the bytes kept for the result (within its cap).
type LiveChunk struct {
	Offset int64  `json:"offset"`
	Total  int64  `json:"total"`
	Bytes  []byte `json:"bytes,omitempty"`
}
