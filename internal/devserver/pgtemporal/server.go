package pgtemporal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/temporal"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sandboxflow/sandboxflow/contract"
)

// clusterName is written to the database on the first start and must never change.
const clusterName = "active"

// Store names in the server's persistence config.
const (
	defaultStore    = "default"
	visibilityStore = "visibility"
)

// Server is a running Temporal server on PostgreSQL. Stop it when done.
type Server struct {
	ts       temporal.Server
	frontend string
}

// Start starts the frontend, history, matching and worker services on cfg's PostgreSQL (whose
// schema SetupSchema must have set up), registers cfg.Namespace and RunCode's search
// attributes when missing, and returns once the namespace answers. Server logs at WARN and
// above go to stderr.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(cfg.Address)
	free, err := freePorts(host, 4)
	if err != nil {
		return nil, err
	}
	logger := log.NewZapLogger(log.BuildZapLogger(log.Config{Level: "warn", Format: "console"}))
	ts, err := temporal.NewServer(serverOptions(cfg, host, free, logger)...)
	if err != nil {
		return nil, fmt.Errorf("pgtemporal: build server: %w", err)
	}
	if err := ts.Start(); err != nil {
		_ = ts.Stop()
		return nil, fmt.Errorf("pgtemporal: start server: %w", err)
	}
	srv := &Server{ts: ts, frontend: cfg.Address}
	ctx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	defer cancel()
	if err := registerNamespace(ctx, cfg); err != nil {
		return nil, errors.Join(err, srv.Stop())
	}
	return srv, nil
}

// FrontendAddress is the frontend's gRPC host:port.
func (s *Server) FrontendAddress() string { return s.frontend }

// Stop stops every service. Stop workers and clients first.
func (s *Server) Stop() error {
	if err := s.ts.Stop(); err != nil {
		return fmt.Errorf("pgtemporal: stop server: %w", err)
	}
	return nil
}

// dynamicConfig holds the settings that differ from the server's defaults.
func dynamicConfig() dynamicconfig.StaticClient {
	return dynamicconfig.StaticClient{
		// Search attributes added at start are usable at once (read from the database).
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true,
		// `starter pending` and the worker's start-up check use visibility; the default of 10
		// requests per second per frontend is meant for a cluster of many frontends.
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 200,
	}
}

func serverOptions(cfg Config, host string, free []int, logger log.Logger) []temporal.ServerOption {
	hostPort := func(port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
	_, fport, _ := net.SplitHostPort(cfg.Address)
	frontendPort, _ := strconv.Atoi(fport)
	service := func(port int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: port, BindOnIP: host}}
	}
	frontendService := service(frontendPort)
	frontendService.RPC.HTTPPort = free[3]

	c := &config.Config{}
	c.Global.Membership = config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: host}
	c.Persistence = config.Persistence{
		DefaultStore:     defaultStore,
		VisibilityStore:  visibilityStore,
		NumHistoryShards: cfg.HistoryShards,
		DataStores: map[string]config.DataStore{
			defaultStore:    {SQL: cfg.sqlConfig(cfg.Database)},
			visibilityStore: {SQL: cfg.sqlConfig(cfg.VisibilityDatabase)},
		},
	}
	c.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {Enabled: true, InitialFailoverVersion: 1, RPCAddress: cfg.Address, HTTPAddress: hostPort(free[3])},
		},
	}
	c.DCRedirectionPolicy.Policy = "noop"
	c.Services = map[string]config.Service{
		string(primitives.FrontendService): frontendService,
		string(primitives.HistoryService):  service(free[0]),
		string(primitives.MatchingService): service(free[1]),
		string(primitives.WorkerService):   service(free[2]),
	}
	c.Archival.History.State = "disabled"
	c.Archival.Visibility.State = "disabled"
	c.NamespaceDefaults.Archival.History.State = "disabled"
	c.NamespaceDefaults.Archival.Visibility.State = "disabled"
	c.PublicClient.HostPort = cfg.Address
	return []temporal.ServerOption{
		temporal.WithConfig(c),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(map[primitives.ServiceName]static.Hosts{
			primitives.FrontendService: static.SingleLocalHost(cfg.Address),
			primitives.HistoryService:  static.SingleLocalHost(hostPort(free[0])),
			primitives.MatchingService: static.SingleLocalHost(hostPort(free[1])),
			primitives.WorkerService:   static.SingleLocalHost(hostPort(free[2])),
		}),
		temporal.WithLogger(logger),
		temporal.WithDynamicConfigClient(dynamicConfig()),
	}
}

// registerNamespace registers the namespace when missing, then RunCode's search attributes,
// retrying while the frontend comes up.
func registerNamespace(ctx context.Context, cfg Config) error {
	var last error
	for {
		last = tryRegister(ctx, cfg)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgtemporal: register namespace %s: %w (last error: %v)", cfg.Namespace, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func tryRegister(ctx context.Context, cfg Config) error {
	c, err := client.DialContext(ctx, client.Options{HostPort: cfg.Address, Namespace: cfg.Namespace, Logger: quietLogger{}})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        cfg.Namespace,
		WorkflowExecutionRetentionPeriod: durationpb.New(cfg.Retention),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return err
	}
	if _, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: cfg.Namespace}); err != nil {
		return err
	}
	return contract.RegisterSearchAttributes(ctx, c.OperatorService(), cfg.Namespace)
}

// freePorts returns n distinct free ports on host, holding every listener until all are chosen.
func freePorts(host string, n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("pgtemporal: pick a free port on %s: %w", host, err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// quietLogger drops the SDK client's logs while Start probes the frontend.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
