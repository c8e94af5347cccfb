package egress

import (
	"net/netip"
	"slices"
)

// addrClass is a named range of addresses the proxy refuses after resolution.
type addrClass struct {
	prefix netip.Prefix
	name   string
	// always is set for addresses that are never a destination (unspecified, multicast,
	// broadcast): PrivateOK does not let them through.
	always bool
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// metadataAddrs are cloud metadata services, named on their own in refusals.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean
	netip.MustParseAddr("169.254.170.2"),   // AWS ECS task metadata
	netip.MustParseAddr("169.254.169.123"), // AWS time sync
	netip.MustParseAddr("fd00:ec2::254"),   // AWS IMDS over IPv6
	netip.MustParseAddr("fd00:ec2::23"),    // AWS DNS over IPv6
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	netip.MustParseAddr("192.0.0.192"),     // Oracle Cloud (classic)
}

// refusedClasses lists what is refused after resolution, most specific first.
var refusedClasses = []addrClass{
	{mustPrefix("0.0.0.0/8"), "unspecified (this network)", true},
	{mustPrefix("255.255.255.255/32"), "broadcast", true},
	{mustPrefix("224.0.0.0/4"), "multicast", true},
	{mustPrefix("::/128"), "unspecified", true},
	{mustPrefix("ff00::/8"), "multicast", true},
	{mustPrefix("127.0.0.0/8"), "loopback", false},
	{mustPrefix("::1/128"), "loopback", false},
	{mustPrefix("10.0.0.0/8"), "private (RFC 1918)", false},
	{mustPrefix("172.16.0.0/12"), "private (RFC 1918)", false},
	{mustPrefix("192.168.0.0/16"), "private (RFC 1918)", false},
	{mustPrefix("100.64.0.0/10"), "shared address space (CGNAT)", false},
	{mustPrefix("169.254.0.0/16"), "link-local", false},
	{mustPrefix("192.0.0.0/24"), "IETF protocol assignments", false},
	{mustPrefix("198.18.0.0/15"), "benchmarking", false},
	{mustPrefix("240.0.0.0/4"), "reserved", false},
	{mustPrefix("fc00::/7"), "IPv6 unique local", false},
	{mustPrefix("fe80::/10"), "IPv6 link-local", false},
	{mustPrefix("fec0::/10"), "IPv6 site-local", false},
	{mustPrefix("::/96"), "IPv4-compatible IPv6", false},
	{mustPrefix("64:ff9b::/96"), "NAT64", false},
	{mustPrefix("64:ff9b:1::/48"), "local-use NAT64", false},
	{mustPrefix("100::/64"), "discard-only", false},
	{mustPrefix("2001::/23"), "IETF protocol assignments (Teredo included)", false},
	{mustPrefix("2001:db8::/32"), "documentation", false},
	{mustPrefix("2002::/16"), "6to4", false},
}

// classify returns why addr may not be dialled, or "" when it may. An IPv4-mapped IPv6 address is
// judged as its IPv4 form. privateOK lets through anything inside it except addresses that are
// never a destination (unspecified, multicast, broadcast).
func classify(addr netip.Addr, privateOK []netip.Prefix) string {
	addr = addr.Unmap().WithZone("")
	for _, c := range refusedClasses {
		if c.always && c.prefix.Contains(addr) {
			return c.name + " address"
		}
	}
	if slices.ContainsFunc(privateOK, func(p netip.Prefix) bool { return p.Contains(addr) }) {
		return ""
	}
	if slices.Contains(metadataAddrs, addr) {
		return "cloud metadata address"
	}
	for _, c := range refusedClasses {
		if c.prefix.Contains(addr) {
			return c.name + " address"
		}
	}
	if !addr.IsGlobalUnicast() {
		return "not a global unicast address"
	}
	return ""
}
