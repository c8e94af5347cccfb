package codec

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testKey returns a deterministic base64 key whose bytes are all b.
func testKey(b byte) string {
	return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, KeySizeBytes))
}

func mustRing(t *testing.T, text string) *KeyRing {
	t.Helper()
	r, err := ParseKeyRing([]byte(text))
	if err != nil {
		t.Fatalf("ParseKeyRing: %v", err)
	}
	return r
}

func TestParseKeyRing(t *testing.T) {
	short := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 16))
	long := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 33))
	tests := []struct {
		name     string
		text     string
		wantIDs  []string // nil when an error is wanted
		wantLine int      // line named by the error; 0 for the file as a whole
	}{
		{name: "one key", text: "k1:" + testKey(1) + "\n", wantIDs: []string{"k1"}},
		{name: "current first", text: "b:" + testKey(2) + "\na:" + testKey(1) + "\n", wantIDs: []string{"b", "a"}},
		{name: "bare base64 is default", text: testKey(1), wantIDs: []string{"default"}},
		{name: "bare plus named", text: "new:" + testKey(2) + "\n" + testKey(1) + "\n", wantIDs: []string{"new", "default"}},
		{name: "blank and comment lines", text: "# keys\n\n  k1:" + testKey(1) + "  \r\n\t\n# old\nk0:" + testKey(0) + "\n", wantIDs: []string{"k1", "k0"}},
		{name: "spaces around id and key", text: " k1 : " + testKey(1) + "\n", wantIDs: []string{"k1"}},
		{name: "id charset", text: "A-z_0.9:" + testKey(1), wantIDs: []string{"A-z_0.9"}},
		{name: "max id length", text: strings.Repeat("x", MaxKeyIDLen) + ":" + testKey(1), wantIDs: []string{strings.Repeat("x", MaxKeyIDLen)}},

		{name: "empty", text: "", wantLine: 0},
		{name: "only comments", text: "# nothing\n\n", wantLine: 0},
		{name: "bad base64", text: "k1:" + testKey(1) + "\nk2:not*base64!\n", wantLine: 2},
		{name: "unpadded base64", text: "k1:" + strings.TrimRight(testKey(1), "="), wantLine: 1},
		{name: "url alphabet", text: "k1:" + base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, KeySizeBytes)), wantLine: 1},
		{name: "key too short", text: "# c\nk1:" + short, wantLine: 2},
		{name: "key too long", text: "k1:" + long, wantLine: 1},
		{name: "duplicate id", text: "a:" + testKey(1) + "\nb:" + testKey(2) + "\na:" + testKey(3), wantLine: 3},
		{name: "two bare lines are both default", text: testKey(1) + "\n" + testKey(2), wantLine: 2},
		{name: "empty id", text: ":" + testKey(1), wantLine: 1},
		{name: "id with slash", text: "a/b:" + testKey(1), wantLine: 1},
		{name: "id with space", text: "a b:" + testKey(1), wantLine: 1},
		{name: "id too long", text: strings.Repeat("x", MaxKeyIDLen+1) + ":" + testKey(1), wantLine: 1},
		{name: "key and id swapped", text: testKey(1) + ":k1", wantLine: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseKeyRing([]byte(tt.text))
			if tt.wantIDs != nil {
				if err != nil {
					t.Fatalf("ParseKeyRing: %v", err)
				}
				if got := r.KeyIDs(); !slices.Equal(got, tt.wantIDs) {
					t.Errorf("KeyIDs() = %v; want %v", got, tt.wantIDs)
				}
				if got := r.CurrentKeyID(); got != tt.wantIDs[0] {
					t.Errorf("CurrentKeyID() = %q; want %q", got, tt.wantIDs[0])
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseKeyRing = %v; want an error", r)
			}
			var kfe *KeyFileError
			if !errors.As(err, &kfe) {
				t.Fatalf("error %v is %T; want *KeyFileError", err, err)
			}
			if kfe.Line != tt.wantLine {
				t.Errorf("error line = %d; want %d (%v)", kfe.Line, tt.wantLine, err)
			}
			if tt.wantLine > 0 && !strings.Contains(err.Error(), fmt.Sprintf("line %d", tt.wantLine)) {
				t.Errorf("error %q does not name line %d", err, tt.wantLine)
			}
			assertNoKeyMaterial(t, err.Error(), tt.text)
		})
	}
}

// assertNoKeyMaterial fails if msg contains any base64 key of text, or a long piece of one.
func assertNoKeyMaterial(t *testing.T, msg, text string) {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		for _, part := range strings.FieldsFunc(line, func(r rune) bool { return r == ':' || r == ' ' }) {
			if len(part) < 12 {
				continue
			}
			for i := 0; i+12 <= len(part); i++ {
				if strings.Contains(msg, part[i:i+12]) {
					t.Fatalf("error %q shows key material %q", msg, part[i:i+12])
				}
			}
		}
	}
}

func TestLoadKeyRing(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "keys")
	if err := os.WriteFile(good, []byte("b:"+testKey(2)+"\na:"+testKey(1)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := LoadKeyRing(good)
	if err != nil {
		t.Fatalf("LoadKeyRing: %v", err)
	}
	if got, want := r.KeyIDs(), []string{"b", "a"}; !slices.Equal(got, want) {
		t.Errorf("KeyIDs() = %v; want %v", got, want)
	}

	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("a:"+testKey(1)+"\na:"+testKey(2)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadKeyRing(bad)
	var kfe *KeyFileError
	if !errors.As(err, &kfe) || kfe.Path != bad || kfe.Line != 2 {
		t.Errorf("LoadKeyRing(dup) = %v; want *KeyFileError for %s line 2", err, bad)
	}

	if _, err := LoadKeyRing(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadKeyRing(missing) = %v; want an error wrapping os.ErrNotExist", err)
	}
	if _, err := LoadKeyRing(""); !errors.As(err, &kfe) || !strings.Contains(err.Error(), KeyFileEnv) {
		t.Errorf("LoadKeyRing(\"\") = %v; want a *KeyFileError naming %s", err, KeyFileEnv)
	}

	huge := filepath.Join(dir, "huge")
	if err := os.WriteFile(huge, bytes.Repeat([]byte("#\n"), maxKeyFileBytes), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyRing(huge); !errors.As(err, &kfe) {
		t.Errorf("LoadKeyRing(huge) = %v; want *KeyFileError", err)
	}
}

func TestGenerateKeyLine(t *testing.T) {
	line1, err := GenerateKeyLine("k2")
	if err != nil {
		t.Fatalf("GenerateKeyLine: %v", err)
	}
	line2, err := GenerateKeyLine("k1")
	if err != nil {
		t.Fatalf("GenerateKeyLine: %v", err)
	}
	if line1[3:] == line2[3:] {
		t.Fatalf("two generated keys are equal")
	}
	r := mustRing(t, line1+"\n"+line2+"\n")
	if got, want := r.KeyIDs(), []string{"k2", "k1"}; !slices.Equal(got, want) {
		t.Errorf("KeyIDs() = %v; want %v", got, want)
	}
	if _, err := GenerateKeyLine("bad id"); err == nil {
		t.Errorf("GenerateKeyLine(\"bad id\") succeeded; want an error")
	}
}

func TestKeyRingNeverPrintsKeys(t *testing.T) {
	text := "b:" + testKey(0xab) + "\na:" + testKey(0xcd) + "\n"
	r := mustRing(t, text)
	var logBuf bytes.Buffer
	slog.New(slog.NewJSONHandler(&logBuf, nil)).Info("ring", slog.Any("ring", r))
	for _, s := range []string{
		fmt.Sprint(r), fmt.Sprintf("%+v", r), fmt.Sprintf("%+v", *r), fmt.Sprintf("%#v", *r), logBuf.String(),
	} {
		assertNoKeyMaterial(t, s, text)
		if strings.Contains(s, string(bytes.Repeat([]byte{0xab}, 4))) {
			t.Errorf("%q shows raw key bytes", s)
		}
	}
	if !strings.Contains(logBuf.String(), `"current_key_id":"b"`) {
		t.Errorf("log record %s does not name the current key id", logBuf.String())
	}
}

func TestNilKeyRing(t *testing.T) {
	var r *KeyRing
	if r.Len() != 0 || r.CurrentKeyID() != "" || len(r.KeyIDs()) != 0 {
		t.Errorf("nil ring: Len %d, CurrentKeyID %q, KeyIDs %v; want 0, \"\", []", r.Len(), r.CurrentKeyID(), r.KeyIDs())
	}
}
