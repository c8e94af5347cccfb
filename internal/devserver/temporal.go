package devserver

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"google.golang.org/protobuf/types/known/durationpb"
)

// clusterName is stored in the database on the first start; it must never
// change, or an existing DataDir would no longer match its own cluster.
const clusterName = "active"

// dynamicConfig holds the settings that differ from the server's defaults.
// Update-with-start, updates and async-accepted updates are on by default in
// v1.32, so they need no entry here.
func dynamicConfig() dynamicconfig.StaticClient {
	return dynamicconfig.StaticClient{
		// Services read search attribute types and a namespace's aliases
		// from the database instead of caches that reload every few seconds,
		// so attributes that Start adds to an existing namespace are usable
		// as soon as Start returns. Cheap on a dev server.
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true,
		// With that cache bypassed, reads hit SQLite more often; raise the
		// persistence rate limits so they are not what throttles a dev run.
		dynamicconfig.FrontendPersistenceMaxQPS.Key(): 10000,
		dynamicconfig.HistoryPersistenceMaxQPS.Key():  45000,
		// The Web UI lists and counts workflows on every page; the default of
		// 10 visibility requests per second makes it show rate-limit errors.
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		// A dev server holds few workflows; a smaller history cache keeps
		// the process small.
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key(): 8192,
	}
}

// sqliteConfig is the one SQLite store that serves persistence and
// visibility. The server's SQLite plugin keeps one connection per distinct
// config for the life of the process, so the same values must be used for
// schema set-up, namespace creation and the server.
//
// The store writes ahead (journal_mode=wal) with synchronous=full: every commit still waits for
// its write to reach the disk (a power cut loses no committed transaction), but with one sync of
// the log instead of the rollback journal's several, which cut a commit from 3.6 to 0.7 ms on this
// machine's disk; every workflow task commits more than once, and this was the largest part of a
// dev run's approve→result (issue 33). The log and its index sit beside the database
// (temporal.db-wal, temporal.db-shm) with the database's own mode.
func sqliteConfig(dbPath string) *config.SQL {
	return &config.SQL{
		PluginName:        sqliteplugin.PluginName,
		DatabaseName:      dbPath,
		ConnectAttributes: map[string]string{"mode": "rwc", "journal_mode": "wal", "synchronous": "full"},
	}
}

// ensureSchema writes the schema into a new database file and leaves an
// existing one alone, so a restart keeps every run.
func ensureSchema(sqlCfg *config.SQL) (created bool, err error) {
	dbPath := sqlCfg.DatabaseName
	_, err = os.Stat(dbPath)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("devserver: stat database %s: %w", dbPath, err)
	}
	if err := sqliteschema.SetupSchema(sqlCfg); err != nil {
		// Remove the half-made file so the next start sets it up again
		// instead of running on an incomplete schema.
		_ = os.Remove(dbPath)
		for _, side := range DatabaseSideFiles {
			_ = os.Remove(dbPath + side)
		}
		return false, fmt.Errorf("devserver: create schema in %s: %w", dbPath, err)
	}
	return true, nil
}

// createNamespace writes the namespace, with its search attributes, straight
// into the database before the server starts, so it is there as soon as the
// frontend answers. It does nothing when the namespace exists (its search
// attributes are then checked through the operator API after start).
func createNamespace(sqlCfg *config.SQL, name string, retention time.Duration, searchAttrs map[string]enumspb.IndexedValueType) error {
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, name, false, searchAttrs)
	if err != nil {
		return fmt.Errorf("devserver: namespace %s: %w", name, err)
	}
	ns.Detail.Config.Retention = durationpb.New(retention)
	if err := sqliteschema.CreateNamespaces(sqlCfg, ns); err != nil {
		return fmt.Errorf("devserver: create namespace %s: %w", name, err)
	}
	return nil
}

// serverPorts are the gRPC ports of the four services and the frontend's
// HTTP API port. Only the frontend's are for clients; the other services
// talk to each other over loopback.
type serverPorts struct {
	frontend, frontendHTTP, history, matching, worker int
}

func serverOptions(host string, ports serverPorts, sqlCfg *config.SQL, logger serverLogger) []temporal.ServerOption {
	hostPort := func(port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
	frontend := hostPort(ports.frontend)
	service := func(port int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: port, BindOnIP: host}}
	}
	// The HTTP API also serves Nexus callbacks; without it the server warns
	// on every start that Nexus is unavailable.
	frontendService := service(ports.frontend)
	frontendService.RPC.HTTPPort = ports.frontendHTTP

	cfg := &config.Config{}
	cfg.Global.Membership = config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: host}
	cfg.Persistence = config.Persistence{
		DefaultStore:     sqliteplugin.PluginName,
		VisibilityStore:  sqliteplugin.PluginName,
		NumHistoryShards: 1,
		DataStores:       map[string]config.DataStore{sqliteplugin.PluginName: {SQL: sqlCfg}},
	}
	cfg.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             frontend,
				HTTPAddress:            hostPort(ports.frontendHTTP),
			},
		},
	}
	cfg.DCRedirectionPolicy.Policy = "noop"
	cfg.Services = map[string]config.Service{
		string(primitives.FrontendService): frontendService,
		string(primitives.HistoryService):  service(ports.history),
		string(primitives.MatchingService): service(ports.matching),
		string(primitives.WorkerService):   service(ports.worker),
	}
	cfg.Archival.History.State = "disabled"
	cfg.Archival.Visibility.State = "disabled"
	cfg.NamespaceDefaults.Archival.History.State = "disabled"
	cfg.NamespaceDefaults.Archival.Visibility.State = "disabled"
	// The worker service (schedules, batch operations) dials the frontend here.
	cfg.PublicClient.HostPort = frontend

	// Static hosts replace ringpop membership: no membership ports, no gossip.
	return []temporal.ServerOption{
		temporal.WithConfig(cfg),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(map[primitives.ServiceName]static.Hosts{
			primitives.FrontendService: static.SingleLocalHost(frontend),
			primitives.HistoryService:  static.SingleLocalHost(hostPort(ports.history)),
			primitives.MatchingService: static.SingleLocalHost(hostPort(ports.matching)),
			primitives.WorkerService:   static.SingleLocalHost(hostPort(ports.worker)),
		}),
		temporal.WithLogger(logger),
		temporal.WithDynamicConfigClient(dynamicConfig()),
	}
}
