package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"

	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"

	"github.com/sandboxflow/sandboxflow/codec"
	"github.com/sandboxflow/sandboxflow/internal/loopback"
)

// Defaults of Connection.
const (
	DefaultAddress   = "127.0.0.1:7233"
	DefaultNamespace = "default"
)

// Connection says how to reach Temporal. ConnectionFromEnv reads Temporal's usual environment
// variables; flags of the worker and starter override them.
type Connection struct {
	// Address is the frontend's host:port (TEMPORAL_ADDRESS). Optional: defaults to 127.0.0.1:7233.
	Address string
	// Namespace (TEMPORAL_NAMESPACE). Optional: defaults to "default".
	Namespace string
	// APIKey authenticates to Temporal Cloud or a server that takes API keys (TEMPORAL_API_KEY).
	// It turns TLS on. Optional.
	APIKey string
	// TLS turns TLS on with the system's roots (TEMPORAL_TLS=true). Optional: defaults to false,
	// or true when any TLS file or an API key is set.
	TLS bool
	// TLSCertPath and TLSKeyPath are a client certificate for mTLS
	// (TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH). Optional.
	TLSCertPath, TLSKeyPath string
	// TLSCAPath is a CA bundle to trust instead of the system's (TEMPORAL_TLS_SERVER_CA_CERT_PATH).
	// Optional.
	TLSCAPath string
	// TLSServerName overrides the name checked in the server's certificate
	// (TEMPORAL_TLS_SERVER_NAME). Optional.
	TLSServerName string
	// KeyRing encrypts and decrypts payloads and failure messages (see package codec). Optional:
	// nil writes in the clear (and still names the missing key when it meets an encrypted payload).
	KeyRing *codec.KeyRing
	// Logger receives the SDK's logs. Optional: slog.Default() at WARN and above.
	Logger *slog.Logger
	// Compression is how requests to Temporal are compressed (SANDBOXFLOW_TEMPORAL_COMPRESSION):
	// "gzip" (the SDK's default), "none", or "" (auto): none when Address is a loopback address,
	// where compressing spends CPU on both ends and saves no bandwidth (a 100 KB chart is
	// compressed and uncompressed several times on its way to a result), gzip otherwise. The
	// server answers in the request's compression.
	Compression string
	// Interceptors are the Temporal client's (and its workers') interceptors, such as the
	// OpenTelemetry tracing one, which carries a caller's trace context into the runs it starts.
	// Optional.
	Interceptors []interceptor.ClientInterceptor
}

// ConnectionFromEnv reads TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS,
// TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH, TEMPORAL_TLS_SERVER_CA_CERT_PATH
// and TEMPORAL_TLS_SERVER_NAME.
func ConnectionFromEnv() Connection {
	return Connection{
		Address:       os.Getenv("TEMPORAL_ADDRESS"),
		Namespace:     os.Getenv("TEMPORAL_NAMESPACE"),
		APIKey:        os.Getenv("TEMPORAL_API_KEY"),
		TLS:           os.Getenv("TEMPORAL_TLS") == "true" || os.Getenv("TEMPORAL_TLS") == "1",
		TLSCertPath:   os.Getenv("TEMPORAL_TLS_CLIENT_CERT_PATH"),
		TLSKeyPath:    os.Getenv("TEMPORAL_TLS_CLIENT_KEY_PATH"),
		TLSCAPath:     os.Getenv("TEMPORAL_TLS_SERVER_CA_CERT_PATH"),
		TLSServerName: os.Getenv("TEMPORAL_TLS_SERVER_NAME"),
		Compression:   os.Getenv("SANDBOXFLOW_TEMPORAL_COMPRESSION"),
	}
}

// WithDefaults fills in the address and namespace.
func (c Connection) WithDefaults() Connection {
	if c.Address == "" {
		c.Address = DefaultAddress
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	return c
}

// Options returns the Temporal client options for the connection.
func (c Connection) Options() (tclient.Options, error) {
	c = c.WithDefaults()
	opts := tclient.Options{
		HostPort:     c.Address,
		Namespace:    c.Namespace,
		Interceptors: c.Interceptors,
	}
	opts = codec.ClientOptions(opts, c.KeyRing)
	compression, err := c.grpcCompression()
	if err != nil {
		return opts, err
	}
	opts.ConnectionOptions.GrpcCompression = compression
	logger := c.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	opts.Logger = tlog.NewStructuredLogger(logger)
	if c.APIKey != "" {
		opts.Credentials = tclient.NewAPIKeyStaticCredentials(c.APIKey)
	}
	if c.TLS || c.APIKey != "" || c.TLSCertPath != "" || c.TLSCAPath != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TLSServerName}
		if c.TLSCertPath != "" || c.TLSKeyPath != "" {
			cert, err := tls.LoadX509KeyPair(c.TLSCertPath, c.TLSKeyPath)
			if err != nil {
				return opts, fmt.Errorf("client: TLS client certificate: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		if c.TLSCAPath != "" {
			pem, err := os.ReadFile(c.TLSCAPath)
			if err != nil {
				return opts, fmt.Errorf("client: TLS CA: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return opts, fmt.Errorf("client: TLS CA %s holds no PEM certificate", c.TLSCAPath)
			}
			cfg.RootCAs = pool
		}
		opts.ConnectionOptions.TLS = cfg
	}
	return opts, nil
}

// Dial connects to Temporal and checks that the namespace answers.
func Dial(ctx context.Context, c Connection) (tclient.Client, error) {
	opts, err := c.Options()
	if err != nil {
		return nil, err
	}
	tc, err := tclient.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("client: dial Temporal at %s (namespace %s): %w", opts.HostPort, opts.Namespace, err)
	}
	return tc, nil
}

// grpcCompression is the SDK's option for c.Compression.
func (c Connection) grpcCompression() (tclient.GrpcCompression, error) {
	switch c.Compression {
	case "gzip":
		return &tclient.GrpcCompressionGzip{}, nil
	case "none":
		return &tclient.GrpcCompressionNone{}, nil
	case "", "auto":
		if loopback.HostPort(c.Address) {
			return &tclient.GrpcCompressionNone{}, nil
		}
		return &tclient.GrpcCompressionGzip{}, nil
	}
	return nil, fmt.Errorf("client: compression %q: want gzip, none or auto (SANDBOXFLOW_TEMPORAL_COMPRESSION)", c.Compression)
}
