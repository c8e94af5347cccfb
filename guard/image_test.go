package guard

import (
	"context"
	"errors"
	"testing"
)

// imageBackend is a fakeBackend that names the image it would run in.
type imageBackend struct {
	fakeBackend
	image string
}

func (b *imageBackend) ImageID(context.Context) (string, error) { return b.image, nil }

// TestDigestBindsTheImage: a request's digest is what it was without an image, and changes with
// the image it names.
func TestDigestBindsTheImage(t *testing.T) {
	c, err := Policy{}.Check(Request{Code: "print(1)"}, "fake")
	if err != nil {
		t.Fatal(err)
	}
	without := Digest(&c)
	if without != c.Digest {
		t.Fatalf("the digest without an image %s is not the check's %s", without, c.Digest)
	}
	c.Image = "sha256:aaaa"
	a := Digest(&c)
	c.Image = "sha256:bbbb"
	if b := Digest(&c); a == without || b == without || a == b {
		t.Errorf("digests without an image, with aaaa, with bbbb: %s %s %s; want three different", without, a, b)
	}
}

// TestGuardedRunsOnlyTheApprovedImage: a request that names an image runs only on a backend
// that would run that image; another image, or a backend that names none, is an ApprovalRefused
// (image) and the backend runs nothing. A request that names none runs as before.
func TestGuardedRunsOnlyTheApprovedImage(t *testing.T) {
	p := Policy{}
	c, err := p.Check(Request{Code: "print(1)"}, "fake")
	if err != nil {
		t.Fatal(err)
	}
	named := c
	named.Image = "sha256:approved"
	named.Digest = Digest(&named)
	for _, tt := range []struct {
		label   string
		backend Backend
		c       Checked
		refused bool
	}{
		{"the approved image", &imageBackend{fakeBackend{name: "fake"}, "sha256:approved"}, named, false},
		{"another image", &imageBackend{fakeBackend{name: "fake"}, "sha256:moved"}, named, true},
		{"a backend naming no image", &fakeBackend{name: "fake"}, named, true},
		{"a request naming none", &imageBackend{fakeBackend{name: "fake"}, "sha256:moved"}, c, false},
	} {
		for _, acquire := range []bool{false, true} {
			var err error
			if acquire {
				var prep *Prepared
				if prep, err = New(tt.backend, p).Acquire(context.Background(), tt.c); err == nil {
					_, err = prep.Run(context.Background())
				}
			} else {
				_, err = New(tt.backend, p).Run(context.Background(), tt.c)
			}
			var ar *ApprovalRefused
			refused := errors.As(err, &ar) && ar.Reason == RefusedImage
			calls := tt.backend.(interface{ ran() int32 }).ran()
			if refused != tt.refused || (refused && calls != 0) {
				t.Errorf("%s (acquire %t): err %v, backend ran %d times; want refused %t and nothing run when refused", tt.label, acquire, err, calls, tt.refused)
			}
		}
	}
}

func (f *fakeBackend) ran() int32 { return f.calls.Load() }
