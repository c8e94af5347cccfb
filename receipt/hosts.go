package receipt

import (
	"encoding/json"
	"fmt"
	"slices"

	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/approval"
)

// Hosts are the sandbox hosts' public keys whose receipts count: an OpenSSH allowed_signers file
// whose principals are host names (`worker-1 namespaces="sandboxflow-receipt" ssh-ed25519 AAAA...`),
// so that ssh-keygen -Y verify reads the same file. It marshals to JSON and back (each key parsed
// again and its fingerprint checked), so that a workflow can record the keys it verifies against.
// The zero value holds no keys and accepts no receipt.
type Hosts struct {
	keys []approval.Key
}

type hostsJSON struct {
	Version int            `json:"version"`
	Keys    []approval.Key `json:"keys"`
}

const hostsJSONVersion = 1

// LoadHosts reads and parses the hosts file at path.
func LoadHosts(path string) (*Hosts, error) {
	r, err := approval.LoadReviewers(path)
	if err != nil {
		return nil, fmt.Errorf("receipt: hosts file: %w", err)
	}
	return &Hosts{keys: r.Keys()}, nil
}

// ParseHosts parses a hosts file's bytes.
func ParseHosts(data []byte) (*Hosts, error) {
	r, err := approval.ParseAllowedSigners(data)
	if err != nil {
		return nil, fmt.Errorf("receipt: hosts file: %w", err)
	}
	return &Hosts{keys: r.Keys()}, nil
}

// Keys returns a copy of the keys, in file order.
func (h *Hosts) Keys() []approval.Key {
	if h == nil {
		return nil
	}
	return slices.Clone(h.keys)
}

// Len returns how many keys h holds.
func (h *Hosts) Len() int {
	if h == nil {
		return 0
	}
	return len(h.keys)
}

// MarshalJSON encodes h as {"version":1,"keys":[...]}.
func (h Hosts) MarshalJSON() ([]byte, error) {
	keys := h.keys
	if keys == nil {
		keys = []approval.Key{}
	}
	return json.Marshal(hostsJSON{Version: hostsJSONVersion, Keys: keys})
}

// UnmarshalJSON decodes what MarshalJSON wrote; every key must parse and match its recorded type
// and fingerprint.
func (h *Hosts) UnmarshalJSON(b []byte) error {
	var v hostsJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("receipt: hosts json: %w", err)
	}
	if v.Version != hostsJSONVersion {
		return fmt.Errorf("receipt: hosts json: version %d; want %d", v.Version, hostsJSONVersion)
	}
	for i, k := range v.Keys {
		pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(k.PublicKey))
		if err != nil {
			return fmt.Errorf("receipt: hosts json: key %d: %w", i, err)
		}
		if pub.Type() != k.KeyType || ssh.FingerprintSHA256(pub) != k.Fingerprint || len(k.Principals) == 0 {
			return fmt.Errorf("receipt: hosts json: key %d: recorded %s %s; the key is %s %s", i, k.KeyType, k.Fingerprint, pub.Type(), ssh.FingerprintSHA256(pub))
		}
	}
	h.keys = v.Keys
	return nil
}

// HostLine returns the hosts-file line of a host named name with key pub.
func HostLine(name string, pub ssh.PublicKey) string {
	return fmt.Sprintf("%s namespaces=%q %s", name, Namespace, ssh.MarshalAuthorizedKey(pub))
}

// HostsOf returns hosts holding keys (as Keys returned them, or an audit record lists them).
func HostsOf(keys []approval.Key) *Hosts {
	return &Hosts{keys: slices.Clone(keys)}
}
