package contract_test

import (
	"math"
	"testing"

	"go.temporal.io/sdk/converter"

	"github.com/sandboxflow/sandboxflow/contract"
)

// A heartbeat's details with a full chunk, however it is split between the streams and at
// offsets as large as they get, encode within 16 KiB and a small header.
func TestLiveOutputEncodesWithinItsBound(t *testing.T) {
	for _, a := range []int{0, 1, 2, 6143, 6144, 12287, contract.MaxLiveChunkBytes} {
		b := contract.MaxLiveChunkBytes - a
		d := contract.LiveOutput{Seq: math.MaxInt64, Cell: math.MaxInt32,
			Stdout: contract.LiveChunk{Offset: math.MaxInt64 - int64(a), Total: math.MaxInt64, Bytes: make([]byte, a)},
			Stderr: contract.LiveChunk{Offset: math.MaxInt64 - int64(b), Total: math.MaxInt64, Bytes: make([]byte, b)}}
		p, err := converter.GetDefaultDataConverter().ToPayload(d)
		if err != nil {
			t.Fatal(err)
		}
		if n := p.Size(); n > contract.MaxLiveEncodedBytes+256 {
			t.Errorf("stdout %d + stderr %d bytes: a %d-byte payload; want at most %d and a small header", a, b, n, contract.MaxLiveEncodedBytes)
		}
		var back contract.LiveOutput
		if err := converter.GetDefaultDataConverter().FromPayload(p, &back); err != nil || len(back.Stdout.Bytes) != a || back.Stderr.Total != math.MaxInt64 {
			t.Errorf("round trip: %+v, %v", back.Stdout.Offset, err)
		}
	}
}
