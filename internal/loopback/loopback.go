// Package loopback says whether an address names this machine: a loopback IP address or
// "localhost". The inbox serves plain HTTP only there; the client does not compress what it sends
// to a Temporal there.
package loopback

import "net"

// Host reports whether host is a loopback IP address or "localhost".
func Host(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// HostPort reports whether the host of address (host:port) is one Host accepts; an address
// without a port is not.
func HostPort(address string) bool {
	host, _, err := net.SplitHostPort(address)
	return err == nil && Host(host)
}
