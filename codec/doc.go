// Package codec encrypts what sandboxflow stores in Temporal history, and serves the codec server
// that lets Temporal's Web UI and CLI show it decrypted to an operator who holds the token.
//
// Temporal keeps every workflow's input and result in its history, so without encryption the
// code, its output and env values sit in the clear in the Temporal database and UI.
//
// # Keys
//
// The worker and the starter read the same key file, named by --key-file or the environment
// variable SANDBOXFLOW_KEY_FILE (KeyFileEnv): one key a line, written as ID:BASE64 where BASE64 is
// the standard base64 of 32 random bytes (AES-256). The first line is the current key: every new
// payload is encrypted with it. The lines below it only decrypt older payloads. A line that is only
// base64 is the key with id "default". Blank lines and lines starting with '#' are ignored. Ids are
// 1 to 64 characters of A-Z a-z 0-9 . _ - and must be unique. Errors name the file and line, never
// key material. Make a key with
//
//	printf 'k1:%s\n' "$(head -c 32 /dev/urandom | base64)" >> keys    # or GenerateKeyLine("k1")
//
// and keep the file readable only by the processes that need it (mode 0600 or a secret mount).
//
// While no key is set, payloads are written in the clear and WarnIfPlaintext logs a WARNING at
// start-up: history holds code and output in the clear.
//
// # Wiring
//
// Both the worker and the starter dial Temporal with ClientOptions, which sets the client's data
// converter (DataConverter: Temporal's default converter plus the Codec) and failure converter
// (ClientOptions sets it); a worker takes both from its client:
//
//	ring, err := codec.LoadKeyRing(keyFile) // when --key-file or SANDBOXFLOW_KEY_FILE is set
//	codec.WarnIfPlaintext(logger, ring)     // ring is nil when none is set
//	c, err := client.Dial(codec.ClientOptions(client.Options{HostPort: addr}, ring))
//
// # The payload format
//
// The Codec encrypts each payload with AES-256-GCM under the current key and a random 96-bit
// nonce. The whole original payload (its metadata, such as "json/plain", and its data) is
// protobuf-encoded and sealed; the stored payload's data is the nonce followed by the ciphertext
// and tag, and its metadata says only encoding "binary/encrypted", the cipher
// ("sandboxflow/aes-256-gcm/v1") and "encryption-key-id". The cipher and key id are bound as
// additional authenticated data, so relabelling a payload with another id fails. Decode passes a
// payload that is not encrypted through unchanged (history written before encryption was turned on
// stays readable), and fails with *UnknownKeyError (the key id is not in the ring), ErrTampered
// (authentication failed) or ErrMalformed. Encryption adds about 140 bytes to each payload, which
// count against Temporal's 2 MB payload limit.
//
// # What is encrypted, and what is not
//
// Encrypted: every payload that goes through the data converter: workflow and activity inputs and
// results (code, files, env values, output), signal and update arguments and results, query
// arguments and results, activity heartbeat details, local activity results and the details of
// errors. With the failure converter that ClientOptions sets, each error's message and stack trace
// move into an encrypted payload too (Temporal's EncodeCommonAttributes), so an error that quotes
// output is not stored in the clear; the failure's type (ToolUsageError, ConfigError,
// IntegrationError, ApprovalDenied) stays readable, and clients without the codec see the message
// "Encoded failure".
//
// Not encrypted, by Temporal's design: search attributes (SandboxStatus, SandboxDigest, ...; they
// must be indexable, and the digest lets anyone see that two runs had the same request), workflow
// and run ids, workflow, activity, signal, update and query names, task queues, timestamps,
// identities, the key id of each payload and payload sizes (which hint at the size of code and
// output). Memo values are encrypted only when the SDK encodes memos with the client's converter,
// which it does not promise: never put secrets in a memo. Anything a client without the codec
// writes (for example `temporal workflow signal` without --codec-endpoint) is stored in the clear,
// and so is history written before a key was set, until the namespace's retention removes it.
//
// # Key rotation
//
// Keys rotate without breaking running workflows, because each payload names its key:
//
//  1. Make a new key and add it as the second line of the key file everywhere (workers, starters,
//     codec servers) and restart them: every reader can now decrypt it, nothing writes it yet.
//  2. Move it to the first line everywhere and restart: new payloads use it; payloads under the old
//     key still decrypt. (On a single host, 1 and 2 can be one step.)
//  3. Keep the old key's line until no open run was started under it and the history you still
//     want to read has passed the namespace's retention. PayloadKeyID reads a payload's key id
//     without any key, so a check can list the keys that open runs' inputs need.
//
// Removing a key too early makes its payloads unreadable: readers get the UnknownKeyError ("payload
// encrypted with key id X, which is not in the key ring; add it back to SANDBOXFLOW_KEY_FILE"). A
// worker that must replay a run whose input is under a removed key fails that run with the same
// error before anything in it runs (the Go SDK fails a workflow whose input cannot be decoded), and
// a signal under a removed key is dropped with an error in the worker's log. Each key should
// encrypt fewer than 2^32 payloads (random nonces); rotate well before that.
//
// # The codec server
//
// Server speaks Temporal's remote codec protocol: POST .../encode and POST .../decode, protobuf
// JSON Payloads in and out; only the last path element counts, so /decode, /{namespace}/decode
// and any prefix work, which is what the temporal CLI (--codec-endpoint, with {namespace}
// replaced) and the Temporal UI (endpoint + "/decode", X-Namespace header) send. One key ring
// serves every namespace; X-Namespace is only logged.
//
// Every encode and decode needs the token: "Authorization: Bearer <token>" (compared in constant
// time), or the sign-in cookie that GET/POST /login sets after the token is entered in a browser.
// The cookie exists because the Temporal UI without OIDC cannot send a bearer token. It holds a
// random sign-in id that the server keeps with an expiry (ServerOptions.SignInTTL, 8 hours by
// default) and the port it was started on; POST /logout ends it, and a restart ends them all. It
// is HttpOnly and SameSite=Strict, and its name carries the port
// (sandboxflow_codec_session_8234; over TLS __Host-sandboxflow_codec_session_8234). Browsers send
// a 127.0.0.1 cookie to every port of the host, so a page served on another local port can still
// receive it: the sign-in is refused on any other port and by any other server, and it expires,
// but a local service that replays it to this port within its lifetime is let in. Log out when
// done, and prefer the bearer token where the client can send one.
//
// /encode and /decode are bounded: the request body (ServerOptions.MaxRequestBytes, 4 MiB), the
// payloads counted before any is decoded (MaxPayloads, 4096), the response (MaxResponseBytes,
// 8 MiB) and the requests served at once (MaxConcurrent, 4; more get 503 with Retry-After).
// Refused requests are logged at most once per LogInterval, with the path cut and a count of the
// refusals not logged. (The UI's
// passAccessToken sends the user's OIDC access token, which this server does not check: with OIDC,
// put an authenticating proxy in front or use /login.)
//
// Browsers may call the server only from ServerOptions.AllowedOrigins; preflight requests (OPTIONS)
// from those get Access-Control-Allow-Headers with Authorization, Content-Type and X-Namespace and
// Allow-Credentials. A request from any other origin is refused. The server answers over plain
// HTTP: bind it to a loopback address, or put a TLS proxy in front.
//
// The temporal CLI reads decoded history with
//
//	temporal workflow show -w ID --codec-endpoint http://127.0.0.1:8234 --codec-auth "Bearer $SANDBOXFLOW_CODEC_TOKEN"
//
// and the Temporal UI with the codec endpoint set (ui-server config codec.endpoint, with
// codec.includeCredentials true) after the operator has opened http://127.0.0.1:8234/login once.
package codec
