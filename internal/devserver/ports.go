package devserver

import (
	"fmt"
	"net"
	"strconv"
)

// PortInUseError reports that a port Start was asked to listen on is taken.
type PortInUseError struct {
	// Service is what wanted the port: "frontend" or "UI".
	Service string
	// Host and Port are what could not be bound.
	Host string
	Port int
	Err  error
}

func (e *PortInUseError) Error() string {
	return fmt.Sprintf("devserver: %s port %s is not free (is another Temporal server or `worker --dev` running? pick another port): %v",
		e.Service, net.JoinHostPort(e.Host, strconv.Itoa(e.Port)), e.Err)
}

func (e *PortInUseError) Unwrap() error { return e.Err }

// checkFree makes sure host:port can be bound now. The server and the UI bind
// their ports themselves later and treat a failure as fatal (the UI calls
// os.Exit), so a taken port must be found here.
func checkFree(service, host string, port int) error {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return &PortInUseError{Service: service, Host: host, Port: port, Err: err}
	}
	if err := l.Close(); err != nil {
		return fmt.Errorf("devserver: release port %s: %w", addr, err)
	}
	return nil
}

// freePorts returns n distinct ports that are free on host. All listeners are
// held until every port is chosen, so the kernel cannot hand out one twice.
func freePorts(host string, n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	var err error
	for range n {
		var l net.Listener
		l, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			err = fmt.Errorf("devserver: pick a free port on %s: %w", host, err)
			break
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range listeners {
		if cerr := l.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("devserver: release port on %s: %w", host, cerr)
		}
	}
	if err != nil {
		return nil, err
	}
	return ports, nil
}
