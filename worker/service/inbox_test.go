package service

import (
	"path/filepath"
	"testing"
)

// The --dev inbox reads the reviewers file the workers verify decisions against: --reviewers when
// given (it used to read only SANDBOXFLOW_REVIEWERS, and so another file), else the development
// reviewer's; the local backend's code may change neither.
func TestDevInboxReadsTheWorkersReviewers(t *testing.T) {
	dir := t.TempDir()
	given := &Options{Dev: true, DataDir: dir, Reviewers: "/etc/sandboxflow/allowed_signers"}
	dev := &Options{Dev: true, DataDir: dir}
	if got := reviewersPath(given); got != given.Reviewers {
		t.Errorf("with --reviewers: the inbox reads %q; want %q", got, given.Reviewers)
	}
	if got, want := reviewersPath(dev), filepath.Join(dir, "reviewer", "allowed_signers"); got != want {
		t.Errorf("without --reviewers: the inbox reads %q; want the development reviewer's %q", got, want)
	}
	for _, o := range []*Options{given, dev} {
		if got := localConfig(o, nil).Unchangeable[0]; got != reviewersPath(o) {
			t.Errorf("the local backend protects %q; want the reviewers file %q", got, reviewersPath(o))
		}
	}
}
