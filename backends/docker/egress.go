package docker

import (
	"crypto/x509"
	"fmt"
	"net/netip"
	"sort"
	"sync"

	"github.com/sandboxflow/sandboxflow/egress"
	"github.com/sandboxflow/sandboxflow/guard"
)

// DefaultEgressPort is the port the supervisor listens on inside the container, on 127.0.0.1,
// when a run has egress.
const DefaultEgressPort = 3128

// EgressConfig configures the filtering proxy (package egress) that serves runs whose request
// carries egress. The proxy runs in the worker; the container stays on --network none and the
// supervisor relays the code's loopback connections to it over the container's stdio.
type EgressConfig struct {
	// PrivateOK are prefixes egress may reach although loopback, private or link-local
	// (--egress-private-ok). Optional: empty refuses them all.
	PrivateOK []netip.Prefix
	// MaxBytes caps one run's egress bytes, out and in. Optional: zero means
	// guard.DefaultEgressMaxBytes.
	MaxBytes int64
	// MaxConns caps one run's connection attempts. Optional: zero means
	// guard.DefaultEgressMaxConns.
	MaxConns int
	// Secrets are the worker's secrets (egress.LoadSecrets); a request names some of them.
	// Optional: nil means a request that names a secret is a ConfigError.
	Secrets *egress.Secrets
	// CA mints certificates for hosts whose requests get a secret header. Required when Secrets
	// is set (egress.LoadOrCreateCA).
	CA *egress.CA
	// RootCAs verifies upstreams of intercepted TLS. Optional: nil means the system roots.
	RootCAs *x509.CertPool
	// Resolver looks up allowed names. Optional: nil means the worker's resolver.
	Resolver egress.Resolver
	// Port is where the supervisor listens inside the container. Optional: zero means
	// DefaultEgressPort.
	Port uint16
}

// sandboxEgress is what the request document says about egress.
type sandboxEgress struct {
	port     uint16
	env      map[string]string
	caPEM    []byte
	caFile   string
	caBundle string
}

// egressPlan returns the sandbox's side of c's egress, or nil when c has none. The proxy itself
// is made by newTunnel, once the run starts.
func (b *Backend) egressPlan(c guard.Checked) *sandboxEgress {
	if len(c.Egress) == 0 {
		return nil
	}
	port := b.cfg.Egress.Port
	if port == 0 {
		port = DefaultEgressPort
	}
	intercept := len(c.Secrets) > 0
	e := &sandboxEgress{
		port: port,
		env:  egress.SandboxEnv(netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port), intercept, egress.SandboxCAFile, egress.SandboxCABundle),
	}
	if intercept && b.cfg.Egress.CA != nil {
		e.caPEM = b.cfg.Egress.CA.CertPEM()
		e.caFile, e.caBundle = egress.SandboxCAFile, egress.SandboxCABundle
	}
	return e
}

// proxyConfig is the egress.Config of one run of c.
func (b *Backend) proxyConfig(c guard.Checked) (egress.Config, error) {
	allow, err := guard.ParseEgressPatterns(c.Egress)
	if err != nil {
		return egress.Config{}, err
	}
	cfg := egress.Config{
		Allow:     allow,
		PrivateOK: b.cfg.Egress.PrivateOK,
		CA:        b.cfg.Egress.CA,
		RootCAs:   b.cfg.Egress.RootCAs,
		Resolver:  b.cfg.Egress.Resolver,
		MaxBytes:  b.cfg.Egress.MaxBytes,
		MaxConns:  b.cfg.Egress.MaxConns,
		Logger:    b.log,
	}
	if len(c.Secrets) > 0 {
		if b.cfg.Egress.Secrets == nil {
			return egress.Config{}, &guard.ConfigError{Msg: "docker backend: the request names secrets and the worker has no --secrets-file"}
		}
		if cfg.Secrets, err = b.cfg.Egress.Secrets.Select(c.Secrets); err != nil {
			return egress.Config{}, err
		}
		if cfg.CA == nil {
			return egress.Config{}, &guard.ConfigError{Msg: "docker backend: the request names secrets and the backend has no egress CA (Config.Egress.CA) to intercept TLS"}
		}
	}
	return cfg, nil
}

// tunnel is the worker's end of one run's egress: the proxy, and the multiplexer that turns the
// supervisor's tunnel frames into the proxy's connections.
type tunnel struct {
	proxy  *egress.Proxy
	mux    *egress.Mux
	served chan struct{}
	once   sync.Once
	report guard.EgressReport
}

// newTunnel starts the proxy of one run of c; frames toward the sandbox go through write.
func (b *Backend) newTunnel(c guard.Checked, write func([]byte) error) (*tunnel, error) {
	cfg, err := b.proxyConfig(c)
	if err != nil {
		return nil, err
	}
	p, err := egress.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("docker: egress proxy: %w", err)
	}
	t := &tunnel{proxy: p, served: make(chan struct{})}
	t.mux = egress.NewMux(func(f egress.Frame) error {
		kind := frameTunnelData
		if f.Kind == egress.FrameClose {
			kind = frameTunnelClose
		}
		return write(encodeFrame(kind, f.ID, f.Data))
	})
	go func() {
		defer close(t.served)
		_ = p.Serve(t.mux.Listener())
	}()
	return t, nil
}

// handle takes one tunnel frame from the supervisor.
func (t *tunnel) handle(ft frameType, ch uint32, payload []byte) error {
	f := egress.Frame{ID: ch}
	switch ft {
	case frameTunnelOpen:
		f.Kind = egress.FrameOpen
	case frameTunnelData:
		if len(payload) > egress.MaxFrameData {
			return fmt.Errorf("sandbox tunnel frame of %d bytes is over %d", len(payload), egress.MaxFrameData)
		}
		f.Kind, f.Data = egress.FrameData, append([]byte(nil), payload...)
	case frameTunnelClose:
		f.Kind = egress.FrameClose
	default:
		return fmt.Errorf("sandbox sent a frame of type %d on channel %d", ft, ch)
	}
	// An error here concerns one connection (an id reused, a full queue): the Mux has closed it
	// toward the sandbox, and the run goes on.
	_ = t.mux.Handle(f)
	return nil
}

// close ends every connection and the proxy, and returns the audit. It may be called more than
// once.
func (t *tunnel) close() guard.EgressReport {
	t.once.Do(func() {
		t.mux.Shutdown()
		_ = t.proxy.Close()
		<-t.served
		t.report = t.proxy.Report()
	})
	return t.report
}

// envPairs returns env sorted by name, as request pairs.
func envPairs(env map[string]string) []supPair {
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]supPair, 0, len(names))
	for _, k := range names {
		out = append(out, supPair{Name: []byte(k), Value: []byte(env[k])})
	}
	return out
}
