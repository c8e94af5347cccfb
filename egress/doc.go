// Package egress is the filtering proxy through which sandboxed code reaches the network, when a
// run asks for egress (issue 13): deny by default, allow named hosts, keep secrets out of the
// sandbox, and record every attempt. It is pure Go: no Docker or Temporal imports.
//
// # What the proxy does
//
// A Proxy serves one run. It speaks HTTP forward proxy on any net.Listener: absolute-form
// http:// requests, and CONNECT for TLS. For every attempt it
//
//   - checks the target (the URL host or the CONNECT authority) against the run's allowlist of
//     guard.EgressPattern values. A name matches name patterns only, an IP literal matches IP and
//     CIDR patterns only, and a name outside the allowlist is never looked up, so DNS cannot
//     carry data out through names the run was not given;
//   - resolves an allowed name itself, at connect time (Config.Resolver), refuses every address
//     that is loopback, private (RFC 1918), link-local, CGNAT, a cloud metadata service
//     (169.254.169.254, fd00:ec2::254, 100.100.100.200, ...), IPv6 unique-local or link-local,
//     multicast, unspecified, reserved, or an IPv4-mapped/NAT64/6to4 form of those, unless it lies
//     in Config.PrivateOK (unspecified, multicast and broadcast never pass), and dials exactly the
//     address it checked, so a name that rebinds to another address later gets nothing;
//   - for CONNECT, answers 200, reads the TLS ClientHello before dialling anything and requires
//     its SNI to equal the CONNECT host (an IP target must send no SNI); anything that is not a
//     TLS ClientHello is refused, so CONNECT carries TLS only, never a raw TCP tunnel;
//   - counts the bytes exchanged with upstreams, out and in, against a per-run cap
//     (DefaultMaxBytes, 64 MiB) and cuts the transfer that crosses it; counts attempts, refused
//     ones included, against a per-run cap (DefaultMaxConns);
//   - records an Attempt {host, port, resolved IP, allowed, reason, bytes out and in, secret names,
//     TLS handling}; Report returns them. No payload and no secret value is ever recorded or
//     logged.
//
// A refusal is a complete HTTP response: 403 (or 400, 421, 431, 502) whose reason phrase, body
// and RefusedHeader say why, so urllib prints "Tunnel connection failed: 403 Forbidden
// (sandboxflow egress: not in the run's egress allowlist)" and curl -v shows the same. A refused
// ClientHello gets a TLS access_denied alert.
//
// # Secrets that never enter the sandbox
//
// The worker's secrets file (ParseSecrets, LoadSecrets; mode 0600 or 0640) has one rule a line:
//
//	# NAME  HOSTPATTERN        Header-Name: value
//	github  api.github.com     Authorization: Bearer ghp_...
//	pypi    upload.pypi.org:443 Authorization: Basic ...
//
// A request names secrets only ("--secret github"); Secrets.Select turns the names into the run's
// Config.Secrets (an unknown name is a guard.ConfigError). A secret adds its header only to
// requests for a host its pattern matches, and the upstream leg is always TLS, verified against
// Config.RootCAs:
//
//   - https (CONNECT) to such a host is intercepted: the proxy completes the client's TLS with a
//     certificate minted on the fly by the worker's CA (LoadOrCreateCA: ECDSA P-256, made once
//     in the worker's data dir, files 0600), reads each HTTP/1.1 request, requires its Host to be
//     the CONNECT host, removes any header of the secret's name the client sent, adds the secret's
//     header, and forwards it over its own TLS connection to the checked address;
//   - plain http:// to such a host is upgraded (TLS origination): port 80 becomes 443, another
//     port keeps its number, and the request goes upstream over TLS.
//
// Other hosts are tunnelled untouched: the proxy never sees their plaintext. Naming a secret
// never widens egress: its host must also be in the run's allowlist. The code can still make
// authenticated requests to that host (that is the point), so a host that echoes request headers
// back would show the value to the code; only give secrets for hosts that do not.
//
// # Integration with the Docker backend
//
// The container stays on --network none (works under runc and under runsc registered with
// --network=none). The in-container supervisor listens on 127.0.0.1:PORT inside the container
// and relays each accepted TCP connection as frames on the container's stdout; the worker writes
// the proxy's frames to the container's stdin. The worker side is a Mux:
//
//	ca, _ := egress.LoadOrCreateCA(filepath.Join(dataDir, "egress"))         // once per worker
//	secrets, _ := egress.LoadSecrets(secretsPath)                             // once per worker
//	rules, err := secrets.Select(checked.Secrets)                             // per run
//	proxy, err := egress.New(egress.Config{Allow: allow, PrivateOK: privateOK, Secrets: rules,
//		CA: ca, MaxBytes: policy.EgressMaxBytes, Logger: logger})
//	mux := egress.NewMux(func(f egress.Frame) error {
//		_, err := stdin.Write(egress.AppendFrame(nil, f)) // serialised by the Mux
//		return err
//	})
//	go proxy.Serve(mux.Listener())
//	// the stdout demultiplexer, for each proxy frame it reads:
//	f, err := egress.ReadFrame(r) // or parse the same 9-byte header yourself
//	err = mux.Handle(f)           // Open, Data or Close
//	// when the run ends:
//	mux.Listener().Close(); proxy.Close(); result.Egress = proxy.Report()
//
// The frame format, both ways: kind (1 byte: 'O' open, 'D' data, 'C' close), connection id
// (uint32, big-endian), data length (uint32, big-endian, at most MaxFrameData), data. The
// supervisor numbers connections from 1 and never reuses an id; it sends 'O' when it accepts a
// connection, 'D' for bytes it reads, 'C' at EOF; on 'D' from the worker it writes to the socket,
// on 'C' it shuts the socket's write side (and closes it once both sides sent 'C'). How these
// frames share the container's stdout with the result JSON is the supervisor's framing to choose;
// the Mux only needs each frame's kind, id and data.
//
// The sandbox's environment is SandboxEnv(127.0.0.1:PORT, proxy.Intercepts(), caFile, bundle):
// HTTP_PROXY, HTTPS_PROXY and their lower-case forms, NO_PROXY=localhost,127.0.0.1,::1 (the
// sandbox's own loopback), npm's names and NODE_USE_ENV_PROXY; with secrets also SSL_CERT_FILE,
// REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, PIP_CERT, GIT_SSL_CAINFO, npm_config_cafile (the bundle) and
// NODE_EXTRA_CA_CERTS (the CA alone). When the run intercepts, the bootstrap writes CA.CertPEM to
// SandboxCAFile and writes SandboxCABundle as the first of ImageCABundles that exists followed by
// the CA, so hosts tunnelled untouched still verify against the image's public roots. The CA
// certificate is public; its key never leaves the worker.
//
// # Production hosts
//
// The sandbox has no network at all (--network none, under runc or runsc); only the worker
// process talks to the outside, and only through this proxy's checks. On the host: let the
// worker's own egress out (and, better, only to the ports the policy allows), keep the sandbox
// user's containers off every Docker network (no network=true unless --allow-open-network, whose
// name says the risk), and give the worker a resolver it trusts, since the proxy's lookups are the
// only DNS a run gets. Metadata services and the host's private networks stay refused unless the
// operator lists a prefix in --egress-private-ok. Under runsc nothing changes: the relay runs over
// the container's stdin and stdout, which gVisor passes through.
//
// Serve a Proxy only on a listener the run's sandbox alone can reach (the Mux, or a socket in a
// private directory): it has no authentication of its own.
package egress
