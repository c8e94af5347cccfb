package loopback

import "testing"

func TestHostPort(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7233": true, "127.8.9.10:1": true, "localhost:7233": true, "[::1]:7233": true,
		"temporal.example:7233": false, "10.0.0.7:7233": false, "[2001:db8::1]:7233": false,
		"localhost.example:7233": false, "127.0.0.1": false, "": false,
	} {
		if got := HostPort(addr); got != want {
			t.Errorf("HostPort(%q) = %v; want %v", addr, got, want)
		}
	}
}
