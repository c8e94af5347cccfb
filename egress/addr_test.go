package egress

import (
	"net/netip"
	"testing"
)

func TestClassify(t *testing.T) {
	ok := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.9.0.0/16")}
	tests := []struct {
		addr      string
		privateOK []netip.Prefix
		refused   bool
	}{
		{"8.8.8.8", nil, false},
		{"2606:4700::1111", nil, false},
		{"127.0.0.1", nil, true},
		{"127.0.0.1", ok, false},
		{"::1", nil, true},
		{"::ffff:127.0.0.1", nil, true},
		{"::ffff:127.0.0.1", ok, false},
		{"10.1.2.3", nil, true},
		{"10.9.2.3", ok, false},
		{"10.1.2.3", ok, true},
		{"172.16.0.1", nil, true},
		{"172.32.0.1", nil, false},
		{"192.168.1.1", nil, true},
		{"100.64.0.1", nil, true},
		{"100.100.100.200", nil, true},
		{"169.254.169.254", nil, true},
		{"::ffff:169.254.169.254", nil, true},
		{"169.254.1.1", nil, true},
		{"fd00:ec2::254", nil, true},
		{"fc00::1", nil, true},
		{"fe80::1", nil, true},
		{"fe80::1%eth0", nil, true},
		{"224.0.0.1", nil, true},
		{"ff02::1", nil, true},
		{"0.0.0.0", nil, true},
		{"0.0.0.0", []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}, true},
		{"::", nil, true},
		{"255.255.255.255", nil, true},
		{"240.0.0.1", nil, true},
		{"64:ff9b::a00:1", nil, true},
		{"2002:a00:1::1", nil, true},
		{"2001:db8::1", nil, true},
		{"::10.0.0.1", nil, true},
	}
	for _, tt := range tests {
		a := netip.MustParseAddr(tt.addr)
		got := classify(a, tt.privateOK)
		if (got != "") != tt.refused {
			t.Errorf("classify(%s, %v) = %q; want refused=%v", tt.addr, tt.privateOK, got, tt.refused)
		}
	}
	if got := classify(netip.MustParseAddr("169.254.169.254"), nil); got != "cloud metadata address" {
		t.Errorf("classify(169.254.169.254) = %q; want %q", got, "cloud metadata address")
	}
}
