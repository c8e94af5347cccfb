package codec_test

import (
	"fmt"
	"log/slog"
	"os"

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

func ExampleClientOptions() {
	logger := slog.Default()
	var ring *codec.KeyRing
	if path := os.Getenv(codec.KeyFileEnv); path != "" {
		var err error
		if ring, err = codec.LoadKeyRing(path); err != nil {
			logger.Error("load keys", slog.Any("error", err))
			return
		}
	}
	codec.WarnIfPlaintext(logger, ring)
	opts := codec.ClientOptions(client.Options{HostPort: "127.0.0.1:7233"}, ring)
	_ = opts // client.Dial(opts), then worker.New(c, ...) or c.ExecuteWorkflow(...)
}
