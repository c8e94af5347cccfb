package devserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/sandboxflow/sandboxflow/internal/defaults"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/server/common/searchattribute/sadefs"
)

// Defaults applied by Start to a zero Config field.
const (
	DefaultAddress      = "127.0.0.1:7233"
	DefaultNamespace    = "default"
	DefaultDataDir      = ".sandboxflow"
	DefaultUIHost       = "127.0.0.1"
	DefaultUIPort       = 8233
	DefaultRetention    = 7 * 24 * time.Hour
	DefaultReadyTimeout = time.Minute
)

// DatabaseFileName is the SQLite file, inside Config.DataDir, that holds all
// of the dev server's state.
const DatabaseFileName = "temporal.db"

// DatabaseSideFiles are the suffixes of the files SQLite keeps beside DatabaseFileName: the
// write-ahead log and its index (the store writes ahead), and a rollback journal (a database made
// before it did). They hold recent history as the database does.
var DatabaseSideFiles = []string{"-wal", "-shm", "-journal"}

// Config configures the embedded server. The zero value is a working dev
// server on the default ports.
type Config struct {
	// Address is the host:port the frontend gRPC service listens on; workers,
	// starters and the UI dial it. The host must be a loopback IP or
	// "localhost" (the server has no authentication). Port 0 picks a free
	// port; FrontendAddress reports it.
	// Optional: defaults to "127.0.0.1:7233".
	Address string

	// Namespace is created on the first start and checked on every start.
	// Optional: defaults to "default".
	Namespace string

	// DataDir holds the SQLite database (temporal.db) and a lock file. It is
	// created with mode 0700 when missing: workflow histories hold the code,
	// files and environment values of every run.
	// Optional: defaults to ".sandboxflow" (relative to the working directory).
	DataDir string

	// Retention is how long closed workflows are kept. It is applied when
	// the namespace is created; an existing namespace keeps its retention.
	// Optional: defaults to 7 days.
	Retention time.Duration

	// SearchAttributes are the custom search attributes registered on
	// Namespace (for sandboxflow: the workflow package's Keyword keys). On a
	// restart, missing ones are added and existing ones are left alone; one
	// that exists with a different type is an error.
	// Optional: defaults to none.
	SearchAttributes []temporal.SearchAttributeKey

	// UIHost is the loopback IP the Web UI listens on.
	// Optional: defaults to "127.0.0.1".
	UIHost string

	// UIPort is the Web UI's HTTP port. A negative port disables the UI.
	// Optional: defaults to 8233.
	UIPort int

	// Codec points the Web UI at a codec server, so it can show payloads the
	// workers encode. Optional: defaults to no codec server.
	Codec Codec

	// Logger receives the server's log records, and Start's own.
	// Optional: defaults to slog.Default().
	Logger *slog.Logger

	// LogLevel is the lowest level of server log records passed to Logger.
	// A *slog.LevelVar may be passed to change it while the server runs.
	// Once Stop begins, server records are dropped: shutting down, the
	// server logs each cancelled request as an error. Stop returns what
	// really fails.
	// Optional: defaults to slog.LevelWarn.
	LogLevel slog.Leveler

	// ReadyTimeout bounds how long Start waits for the frontend, the
	// namespace and the UI to answer after the server has started.
	// Optional: defaults to 1 minute.
	ReadyTimeout time.Duration
}

// Codec is the codec server the Web UI calls to decode payloads in the
// browser.
type Codec struct {
	// Endpoint is the codec server's absolute http(s) URL.
	// Optional: empty means no codec server.
	Endpoint string
	// PassAccessToken makes the UI send the user's access token to Endpoint.
	// Optional: defaults to false.
	PassAccessToken bool
	// IncludeCredentials makes the UI send cookies and other credentials
	// with its requests to Endpoint.
	// Optional: defaults to false.
	IncludeCredentials bool
}

// settings is a validated Config with its defaults applied and its address
// split.
type settings struct {
	Config
	frontendHost string
	frontendPort int // 0: pick a free port
	searchAttrs  map[string]enumspb.IndexedValueType
}

func (c Config) resolve() (settings, error) {
	defaults.Zero(&c, Config{
		Address: DefaultAddress, Namespace: DefaultNamespace, DataDir: DefaultDataDir,
		Retention: DefaultRetention, UIHost: DefaultUIHost, UIPort: DefaultUIPort,
		Logger: slog.Default(), LogLevel: slog.LevelWarn, ReadyTimeout: DefaultReadyTimeout,
	})

	s := settings{Config: c}
	var errs []error
	host, port, err := splitLoopback(c.Address, true)
	if err != nil {
		errs = append(errs, fmt.Errorf("address %q: %w", c.Address, err))
	}
	s.frontendHost, s.frontendPort = host, port
	if c.UIPort > 0 {
		if c.UIPort > 65535 {
			errs = append(errs, fmt.Errorf("UI port %d: out of range 1-65535", c.UIPort))
		}
		h, _, err := splitLoopback(net.JoinHostPort(c.UIHost, "1"), false)
		if err != nil {
			errs = append(errs, fmt.Errorf("UI host %q: %w", c.UIHost, err))
		}
		s.UIHost = h
	}
	if c.Retention < 0 {
		errs = append(errs, fmt.Errorf("retention %s: must not be negative", c.Retention))
	}
	if c.ReadyTimeout < 0 {
		errs = append(errs, fmt.Errorf("ready timeout %s: must not be negative", c.ReadyTimeout))
	}
	if c.Codec.Endpoint != "" {
		u, err := url.Parse(c.Codec.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("codec endpoint %q: want an absolute http or https URL", c.Codec.Endpoint))
		}
	}
	s.searchAttrs, err = searchAttributeTypes(c.SearchAttributes)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return settings{}, fmt.Errorf("devserver: invalid config: %w", err)
	}
	return s, nil
}

// splitLoopback splits host:port, maps "localhost" to 127.0.0.1 (the server
// binds to IPs only) and refuses hosts that are not loopback IPs.
func splitLoopback(hostPort string, allowZeroPort bool) (string, int, error) {
	host, portStr, err := net.SplitHostPort(hostPort)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 || (port == 0 && !allowZeroPort) {
		return "", 0, fmt.Errorf("port %q: out of range", portStr)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return "", 0, fmt.Errorf("host %q: want an IP address or localhost", host)
	}
	if !ip.IsLoopback() {
		return "", 0, fmt.Errorf("host %q is not a loopback address; the dev server has no authentication, so it only listens on loopback", host)
	}
	return ip.String(), port, nil
}

func searchAttributeTypes(keys []temporal.SearchAttributeKey) (map[string]enumspb.IndexedValueType, error) {
	types := make(map[string]enumspb.IndexedValueType, len(keys))
	var errs []error
	for _, k := range keys {
		if k == nil {
			errs = append(errs, errors.New("search attribute: nil key"))
			continue
		}
		name, typ := k.GetName(), k.GetValueType()
		switch {
		case name == "":
			errs = append(errs, errors.New("search attribute: empty name"))
		case typ == enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED:
			errs = append(errs, fmt.Errorf("search attribute %s: unspecified type", name))
		case sadefs.IsReserved(name):
			errs = append(errs, fmt.Errorf("search attribute %s: name is reserved by Temporal", name))
		default:
			if prev, ok := types[name]; ok && prev != typ {
				errs = append(errs, fmt.Errorf("search attribute %s: listed as both %s and %s", name, prev, typ))
			}
			types[name] = typ
		}
	}
	return types, errors.Join(errs...)
}
