package devserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
)

// webUI is the running Temporal Web UI.
type webUI struct {
	srv  *uiserver.Server
	done chan error
	url  string
}

// startUI serves the Web UI on host:port against the frontend. The UI
// server's Start blocks and, if it cannot listen, exits the process, so the
// port must have been checked free just before.
func startUI(host string, port int, frontend, namespace string, codec Codec) *webUI {
	hostPort := net.JoinHostPort(host, strconv.Itoa(port))
	// The UI server joins Host and Port with a bare colon, so an IPv6 host
	// needs its brackets here.
	uiHost := host
	if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
		uiHost = "[" + host + "]"
	}
	srv := uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
		Host:                uiHost,
		Port:                port,
		TemporalGRPCAddress: frontend,
		EnableUI:            true,
		DefaultNamespace:    namespace,
		// The UI page would otherwise fetch news from temporal.io.
		DisableNewsFetch: true,
		HideLogs:         true,
		// Plain HTTP on loopback: the CSRF cookie must not be marked Secure,
		// or the browser drops it and every write action (signal, cancel)
		// fails.
		CORS: uiconfig.CORS{CookieInsecure: true},
		Codec: uiconfig.Codec{
			Endpoint:           codec.Endpoint,
			PassAccessToken:    codec.PassAccessToken,
			IncludeCredentials: codec.IncludeCredentials,
		},
	}))
	ui := &webUI{srv: srv, done: make(chan error, 1), url: "http://" + hostPort}
	go func() { ui.done <- srv.Start() }()
	return ui
}

// waitReady returns once the UI answers its health check.
func (ui *webUI) waitReady(ctx context.Context) error {
	healthz := ui.url + "/healthz"
	// Loopback only: no proxy from the environment.
	tr := &http.Transport{Proxy: nil}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	return retry(ctx, "wait for web UI "+ui.url, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, healthz, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", healthz, resp.Status)
		}
		return nil
	})
}

func (ui *webUI) stop() error {
	ui.srv.Stop()
	if err := <-ui.done; err != nil {
		return fmt.Errorf("devserver: web UI: %w", err)
	}
	return nil
}
