package codec

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"
)

const secret = "print('sk-live-TOP-SECRET-42')"

func plainPayloads(t *testing.T, values ...any) []*commonpb.Payload {
	t.Helper()
	ps, err := converter.GetDefaultDataConverter().ToPayloads(values...)
	if err != nil {
		t.Fatal(err)
	}
	return ps.Payloads
}

func TestCodecRoundTrip(t *testing.T) {
	ring := mustRing(t, "k1:"+testKey(1))
	c := NewCodec(ring)
	in := plainPayloads(t, secret, map[string]string{"API_KEY": "hunter2-value"}, []byte{0, 1, 2}, nil)
	enc, err := c.Encode(in)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if len(enc) != len(in) {
		t.Fatalf("Encode returned %d payloads; want %d", len(enc), len(in))
	}
	for i, p := range enc {
		if got := string(p.Metadata[MetadataEncoding]); got != EncodingEncrypted {
			t.Errorf("payload %d encoding = %q; want %q", i, got, EncodingEncrypted)
		}
		if got := string(p.Metadata[MetadataKeyID]); got != "k1" {
			t.Errorf("payload %d key id = %q; want k1", i, got)
		}
		raw, _ := proto.Marshal(p)
		for _, s := range []string{"sk-live-TOP-SECRET", "hunter2", "json/plain"} {
			if bytes.Contains(raw, []byte(s)) {
				t.Errorf("encrypted payload %d contains %q", i, s)
			}
		}
	}
	dec, err := c.Decode(enc)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	for i := range in {
		if !proto.Equal(dec[i], in[i]) {
			t.Errorf("payload %d: decoded %v; want %v", i, dec[i], in[i])
		}
	}

	// Same plaintext twice gives different ciphertexts: the nonce is random.
	enc2, err := c.Encode(in[:1])
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(enc2[0].Data, enc[0].Data) {
		t.Errorf("two encryptions of the same payload are equal; want a fresh nonce each time")
	}
}

func TestCodecDoesNotMutateInput(t *testing.T) {
	c := NewCodec(mustRing(t, "k1:"+testKey(1)))
	in := plainPayloads(t, secret)
	before := proto.Clone(in[0])
	enc, err := c.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(in[0], before) {
		t.Errorf("Encode changed its input")
	}
	encBefore := proto.Clone(enc[0])
	if _, err := c.Decode(enc); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(enc[0], encBefore) {
		t.Errorf("Decode changed its input")
	}
}

func TestCodecEncodeTwiceDoesNotNest(t *testing.T) {
	c := NewCodec(mustRing(t, "k1:"+testKey(1)))
	in := plainPayloads(t, secret)
	once, err := c.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	twice, err := c.Encode(once)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := c.Decode(twice)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(dec[0], in[0]) {
		t.Errorf("decode of doubly encoded payload = %v; want %v", dec[0], in[0])
	}
}

func TestCodecDecodePassesPlaintextThrough(t *testing.T) {
	for _, ring := range []*KeyRing{nil, mustRing(t, "k1:"+testKey(1))} {
		c := NewCodec(ring)
		in := plainPayloads(t, "hello", 42)
		in = append(in, &commonpb.Payload{Data: []byte("no metadata at all")})
		out, err := c.Decode(in)
		if err != nil {
			t.Fatalf("Decode(plain) with %v: %v", ring, err)
		}
		for i := range in {
			if out[i] != in[i] {
				t.Errorf("%v: payload %d was changed; want it passed through", ring, i)
			}
		}
	}
}

func TestCodecEmptyRingWritesClearAndNamesMissingKey(t *testing.T) {
	plain := NewCodec(nil)
	in := plainPayloads(t, secret)
	out, err := plain.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(out[0], in[0]) {
		t.Errorf("Encode with no ring changed the payload; want it in the clear")
	}
	enc, err := NewCodec(mustRing(t, "k1:"+testKey(1))).Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	_, err = plain.Decode(enc)
	var uk *UnknownKeyError
	if !errors.As(err, &uk) || uk.KeyID != "k1" || !uk.RingEmpty {
		t.Fatalf("Decode with no ring = %v; want *UnknownKeyError{k1, RingEmpty}", err)
	}
	if !strings.Contains(err.Error(), KeyFileEnv) {
		t.Errorf("error %q does not say to set %s", err, KeyFileEnv)
	}
}

func TestCodecRejectsTampering(t *testing.T) {
	ring := mustRing(t, "k1:"+testKey(1)+"\nk2:"+testKey(2))
	c := NewCodec(ring)
	enc, err := c.Encode(plainPayloads(t, secret))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		modify func(p *commonpb.Payload)
		want   error
	}{
		{"flip a ciphertext bit", func(p *commonpb.Payload) { p.Data[len(p.Data)/2] ^= 1 }, ErrTampered},
		{"flip a nonce bit", func(p *commonpb.Payload) { p.Data[0] ^= 1 }, ErrTampered},
		{"flip a tag bit", func(p *commonpb.Payload) { p.Data[len(p.Data)-1] ^= 1 }, ErrTampered},
		{"append a byte", func(p *commonpb.Payload) { p.Data = append(p.Data, 0) }, ErrTampered},
		{"relabel to another key in the ring", func(p *commonpb.Payload) { p.Metadata[MetadataKeyID] = []byte("k2") }, ErrTampered},
		{"truncate below nonce and tag", func(p *commonpb.Payload) { p.Data = p.Data[:27] }, ErrMalformed},
		{"no key id", func(p *commonpb.Payload) { delete(p.Metadata, MetadataKeyID) }, ErrMalformed},
		{"other cipher", func(p *commonpb.Payload) { p.Metadata[MetadataCipher] = []byte("AES256-CBC") }, ErrMalformed},
		{"no cipher", func(p *commonpb.Payload) { delete(p.Metadata, MetadataCipher) }, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := proto.Clone(enc[0]).(*commonpb.Payload)
			tt.modify(p)
			_, err := c.Decode([]*commonpb.Payload{p})
			if !errors.Is(err, tt.want) {
				t.Errorf("Decode = %v; want %v", err, tt.want)
			}
		})
	}
}

func TestCodecBindsKeyID(t *testing.T) {
	// Two ids over the same key material: only the additional data tells them apart.
	c := NewCodec(mustRing(t, "k1:"+testKey(1)+"\nk2:"+testKey(1)))
	enc, err := c.Encode(plainPayloads(t, secret))
	if err != nil {
		t.Fatal(err)
	}
	p := proto.Clone(enc[0]).(*commonpb.Payload)
	p.Metadata[MetadataKeyID] = []byte("k2")
	if _, err := c.Decode([]*commonpb.Payload{p}); !errors.Is(err, ErrTampered) {
		t.Errorf("Decode of a payload relabelled k1 -> k2 = %v; want ErrTampered", err)
	}
}

func TestCodecWrongKeyFails(t *testing.T) {
	enc, err := NewCodec(mustRing(t, "k1:"+testKey(1))).Encode(plainPayloads(t, secret))
	if err != nil {
		t.Fatal(err)
	}
	// Same id, other key material: authentication fails.
	_, err = NewCodec(mustRing(t, "k1:"+testKey(9))).Decode(enc)
	if !errors.Is(err, ErrTampered) {
		t.Errorf("Decode with other key under the same id = %v; want ErrTampered", err)
	}
}

func TestCodecRotation(t *testing.T) {
	keyA, keyB := "a:"+testKey(0xa), "b:"+testKey(0xb)
	underA, err := NewCodec(mustRing(t, keyA)).Encode(plainPayloads(t, secret))
	if err != nil {
		t.Fatal(err)
	}

	rotated := NewCodec(mustRing(t, keyB+"\n"+keyA))
	dec, err := rotated.Decode(underA)
	if err != nil {
		t.Fatalf("Decode of a payload under a with ring [b a]: %v", err)
	}
	var got string
	if err := converter.GetDefaultDataConverter().FromPayload(dec[0], &got); err != nil || got != secret {
		t.Errorf("decoded value = %q, %v; want %q", got, err, secret)
	}
	underB, err := rotated.Encode(plainPayloads(t, secret))
	if err != nil {
		t.Fatal(err)
	}
	if id := string(underB[0].Metadata[MetadataKeyID]); id != "b" {
		t.Errorf("new payload key id = %q; want b (the current key)", id)
	}

	_, err = NewCodec(mustRing(t, keyB)).Decode(underA)
	var uk *UnknownKeyError
	if !errors.As(err, &uk) || uk.KeyID != "a" || uk.RingEmpty {
		t.Fatalf("Decode of a payload under a with ring [b] = %v; want *UnknownKeyError{KeyID: a}", err)
	}
	want := `codec: payload encrypted with key id "a", which is not in the key ring; add it back to SANDBOXFLOW_KEY_FILE`
	if err.Error() != want {
		t.Errorf("error = %q; want %q", err, want)
	}
}

func TestPayloadKeyID(t *testing.T) {
	plain := plainPayloads(t, secret)
	enc, err := NewCodec(mustRing(t, "k7:"+testKey(7))).Encode(plain)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := PayloadKeyID(enc[0]); id != "k7" || !ok {
		t.Errorf("PayloadKeyID(encrypted) = %q, %v; want k7, true", id, ok)
	}
	if id, ok := PayloadKeyID(plain[0]); id != "" || ok {
		t.Errorf("PayloadKeyID(plain) = %q, %v; want \"\", false", id, ok)
	}
	foreign := &commonpb.Payload{Metadata: map[string][]byte{MetadataEncoding: []byte(EncodingEncrypted), MetadataKeyID: []byte("x")}}
	if _, ok := PayloadKeyID(foreign); ok {
		t.Errorf("PayloadKeyID(other codec's payload) = true; want false")
	}
}

func TestDataConverterRoundTrip(t *testing.T) {
	type input struct {
		Code string
		Env  map[string]string
	}
	dc := DataConverter(mustRing(t, "k1:"+testKey(1)))
	in := input{Code: secret, Env: map[string]string{"TOKEN": "env-value-xyz"}}
	p, err := dc.ToPayload(in)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(p.Data, []byte("env-value-xyz")) || bytes.Contains(p.Data, []byte("TOP-SECRET")) {
		t.Errorf("payload data holds plaintext")
	}
	var out input
	if err := dc.FromPayload(p, &out); err != nil {
		t.Fatal(err)
	}
	if out.Code != in.Code || out.Env["TOKEN"] != "env-value-xyz" {
		t.Errorf("round trip = %+v; want %+v", out, in)
	}
	if s := dc.ToString(p); !strings.Contains(s, "TOP-SECRET") {
		t.Errorf("ToString = %q; want the decoded value", s)
	}
}

func TestClientOptions(t *testing.T) {
	ring := mustRing(t, "k1:"+testKey(1))
	opts := ClientOptions(client.Options{HostPort: "127.0.0.1:7233"}, ring)
	if opts.HostPort != "127.0.0.1:7233" {
		t.Errorf("HostPort = %q; want it kept", opts.HostPort)
	}
	if opts.DataConverter == nil || opts.FailureConverter == nil {
		t.Fatalf("DataConverter %v, FailureConverter %v; want both set", opts.DataConverter, opts.FailureConverter)
	}
	p, err := opts.DataConverter.ToPayload(secret)
	if err != nil {
		t.Fatal(err)
	}
	if string(p.Metadata[MetadataKeyID]) != "k1" {
		t.Errorf("payload metadata %v; want key id k1", p.Metadata)
	}

	// The failure converter moves the message into an encrypted payload.
	f := opts.FailureConverter.ErrorToFailure(temporal.NewNonRetryableApplicationError("output was "+secret, "ToolUsageError", nil))
	raw, _ := proto.Marshal(f)
	if bytes.Contains(raw, []byte("TOP-SECRET")) {
		t.Errorf("failure holds the message in the clear: %v", f)
	}
	if f.GetApplicationFailureInfo().GetType() != "ToolUsageError" {
		t.Errorf("failure type = %q; want ToolUsageError kept readable", f.GetApplicationFailureInfo().GetType())
	}
	back := opts.FailureConverter.FailureToError(f)
	if !strings.Contains(back.Error(), "TOP-SECRET") {
		t.Errorf("decoded failure = %q; want the original message", back)
	}

	// A custom data converter is wrapped, not replaced; a custom failure converter is kept.
	custom := converter.NewCompositeDataConverter(converter.NewJSONPayloadConverter())
	fc := temporal.GetDefaultFailureConverter()
	opts = ClientOptions(client.Options{DataConverter: custom, FailureConverter: fc}, ring)
	if opts.FailureConverter != fc {
		t.Errorf("FailureConverter replaced; want the caller's kept")
	}
	p, err = opts.DataConverter.ToPayload([]byte("bytes"))
	if err != nil {
		t.Fatal(err)
	}
	dec, err := NewCodec(ring).Decode([]*commonpb.Payload{p})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(dec[0].Metadata[MetadataEncoding]); got != "json/plain" {
		t.Errorf("inner encoding = %q; want json/plain from the caller's converter", got)
	}

	// Without a key, payloads and failure messages stay readable (and the start-up warning says so).
	opts = ClientOptions(client.Options{}, nil)
	f = opts.FailureConverter.ErrorToFailure(errors.New("plain message"))
	if f.GetMessage() != "plain message" {
		t.Errorf("failure message without a key = %q; want it in the clear", f.GetMessage())
	}
}

func TestWarnIfPlaintext(t *testing.T) {
	tests := []struct {
		name string
		ring *KeyRing
		want bool
	}{
		{"nil ring", nil, true},
		{"empty ring", &KeyRing{}, true},
		{"with key", mustRing(t, "k1:"+testKey(1)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&buf, nil))
			if got := WarnIfPlaintext(logger, tt.ring); got != tt.want {
				t.Errorf("WarnIfPlaintext = %v; want %v", got, tt.want)
			}
			logged := buf.String()
			if tt.want {
				if !strings.Contains(logged, "level=WARN") || !strings.Contains(logged, "in the clear") || !strings.Contains(logged, KeyFileEnv) {
					t.Errorf("log = %q; want a WARN saying history is in the clear and naming %s", logged, KeyFileEnv)
				}
			} else if logged != "" {
				t.Errorf("log = %q; want nothing", logged)
			}
		})
	}
}
