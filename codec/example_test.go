package codec_test

import (
	"bytes"
	"fmt"
	"log/slog"

	"go.temporal.io/sdk/client"

	"github.com/sandboxflow/sandboxflow/codec"
)

func ExampleParseKeyRing() {
	// The first line is the current key; "old" only decrypts payloads written before the rotation.
	ring, err := codec.ParseKeyRing([]byte(`# sandboxflow payload keys
new:AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=
old:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ring.CurrentKeyID(), ring.KeyIDs())
	fmt.Println(ring)
	// Output:
	// new [new old]
	// key ring [new old] (current new)
}

// A client (or worker) whose payloads are encrypted with the key ring: what it sends holds no
// plaintext, and it reads back what it wrote. Load the ring with codec.LoadKeyRing from the file
// SANDBOXFLOW_KEY_FILE names; WarnIfPlaintext logs a warning when there is none.
func ExampleClientOptions() {
	ring, err := codec.ParseKeyRing([]byte("k1:AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	codec.WarnIfPlaintext(slog.Default(), ring)
	opts := codec.ClientOptions(client.Options{HostPort: "127.0.0.1:7233"}, ring)
	// client.Dial(opts), then worker.New(c, ...) or c.ExecuteWorkflow(...).

	p, err := opts.DataConverter.ToPayload("print('secret')")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(p.Metadata["encoding"]), bytes.Contains(p.Data, []byte("secret")))
	var back string
	if err := opts.DataConverter.FromPayload(p, &back); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(back)
	// Output:
	// binary/encrypted false
	// print('secret')
}
