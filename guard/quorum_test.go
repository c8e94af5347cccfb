package guard

import (
	"errors"
	"testing"
)

func TestQuorumFor(t *testing.T) {
	plain := Checked{}
	for _, tt := range []struct {
		name  string
		p     Policy
		c     Checked
		want  int
		risky bool
	}{
		{"default", Policy{}, plain, 1, false},
		{"quorum 2", Policy{Quorum: 2}, plain, 2, false},
		{"risky quorum, plain run", Policy{RiskyQuorum: 3}, plain, 1, false},
		{"risky quorum, network", Policy{RiskyQuorum: 3}, Checked{CheckedSettings: CheckedSettings{Network: true}}, 3, true},
		{"risky quorum, egress", Policy{RiskyQuorum: 2}, Checked{CheckedSettings: CheckedSettings{Egress: []string{"api.example.com"}}}, 2, true},
		{"risky quorum, secrets", Policy{RiskyQuorum: 2}, Checked{CheckedSettings: CheckedSettings{Secrets: []string{"TOKEN"}}}, 2, true},
		{"risky quorum under quorum", Policy{Quorum: 3, RiskyQuorum: 2}, Checked{CheckedSettings: CheckedSettings{Network: true}}, 3, true},
	} {
		if got := tt.p.QuorumFor(&tt.c); got != tt.want {
			t.Errorf("%s: QuorumFor = %d; want %d", tt.name, got, tt.want)
		}
		if got := Risky(&tt.c); got != tt.risky {
			t.Errorf("%s: Risky = %t; want %t", tt.name, got, tt.risky)
		}
	}
}

func TestPolicyRefusesABadQuorum(t *testing.T) {
	for _, p := range []Policy{{Quorum: -1}, {RiskyQuorum: -1}, {Quorum: MaxQuorum + 1}, {RiskyQuorum: MaxQuorum + 1}} {
		var ce *ConfigError
		if err := p.Validate(); !errors.As(err, &ce) {
			t.Errorf("Validate(quorum %d, risky %d) = %v; want a ConfigError", p.Quorum, p.RiskyQuorum, err)
		}
	}
	if err := (Policy{Quorum: MaxQuorum, RiskyQuorum: MaxQuorum}).Validate(); err != nil {
		t.Errorf("Validate(quorum %d) = %v; want nil", MaxQuorum, err)
	}
}
