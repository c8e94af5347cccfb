package approval

import (
	"testing"
)

func FuzzParseSSHSignature(f *testing.F) {
	f.Add(mustSign(f, newEd25519Signer(f), []byte("seed")))
	f.Add(mustSign(f, newSKSigner(f, KeyTypeSKECDSAP256, 1), []byte("seed")))
	f.Add(armorBegin + "\nU1NIU0lH\n" + armorEnd)
	f.Add("")
	r := mustReviewers(f, allowedLine("alice", "", newEd25519Signer(f).PublicKey()))
	fields := testFields()
	f.Fuzz(func(t *testing.T, armored string) {
		if sig, err := ParseSSHSignature(armored); err == nil {
			if _, err := ParseSSHSignature(sig.Marshal()); err != nil {
				t.Fatalf("Marshal of a parsed signature does not parse: %v", err)
			}
		}
		if _, err := Verify(r, fields, Proof{Signature: armored}, testNow); err == nil {
			t.Fatalf("a fuzzed signature verified")
		}
	})
}

func FuzzParseAllowedSigners(f *testing.F) {
	ed := newEd25519Signer(f).PublicKey()
	sk := newSKSigner(f, KeyTypeSKEd25519, 1).PublicKey()
	f.Add([]byte(allowedLine("alice,*@example.com", `namespaces="sandboxflow-approval",valid-after="20260101Z"`, ed) + " c\n"))
	f.Add([]byte(allowedLine(`"bob smith"`, "", sk) + "\n# x\n"))
	f.Add([]byte(`a cert-authority,namespaces="a\"b" ssh-ed25519 AAAA`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseAllowedSigners(data)
		if err != nil {
			return
		}
		b, err := r.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON: %v", err)
		}
		var back Reviewers
		if err := back.UnmarshalJSON(b); err != nil {
			t.Fatalf("UnmarshalJSON of %s: %v", b, err)
		}
	})
}

func FuzzParseStatement(f *testing.F) {
	f.Add(mustStatement(f, testFields()))
	f.Fuzz(func(t *testing.T, b []byte) {
		fields, err := ParseStatement(b)
		if err != nil {
			return
		}
		again, err := fields.Statement()
		if err != nil || string(again) != string(b) {
			t.Fatalf("parsed statement does not write back the same: %q, %v", again, err)
		}
	})
}
