package guard

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDiffPackages(t *testing.T) {
	hashC := "sha256:" + strings.Repeat("c", 64)
	before, err := ParseLock("alpha==1.0 --hash=" + hashA + "\nbeta==2.0 --hash=" + hashA + "\ngamma==3.0 --hash=" + hashA + " --hash=" + hashB + "\ndelta==4 --hash=" + hashA + "\nextra==1 --hash=" + hashA + "\n")
	require.NoError(t, err)
	after, err := ParseLock("beta==2.1 --hash=" + hashB + "\ngamma==3.0 --hash=" + hashA + " --hash=" + hashC + "\ndelta==4 --hash=" + hashA + "\nextra[x]==1 --hash=" + hashA + "\nzeta==0.1 --hash=" + hashC + "\n")
	require.NoError(t, err)
	var got []string
	for _, c := range DiffPackages(before, after) {
		got = append(got, c.Kind+": "+c.String())
	}
	assert.Equal(t, []string{
		"removed: removed alpha==1.0",
		"version changed: beta: version 2.0 -> 2.1",
		"extras changed: extra: extras [] -> [x]",
		"hashes changed: gamma==3.0: hashes changed (+1 -1)",
		"added: added zeta==0.1",
	}, got)
	assert.Empty(t, DiffPackages(after, after))

	again, err := ParseLock(Lock(after))
	require.NoError(t, err)
	assert.Equal(t, after, again, "Lock writes what ParseLock reads back")
}

// A cell adds packages to its session's set; a cell that brings a package the session has at
// another version, with other hashes or other extras is refused naming it.
func TestAddCellPackages(t *testing.T) {
	set, err := ParseLock("alpha==1.0 --hash=" + hashA + "\ngamma==3.0 --hash=" + hashA + "\n")
	require.NoError(t, err)
	cell, err := ParseLock("beta==2.0 --hash=" + hashB + "\ngamma==3.0 --hash=" + hashA + "\n")
	require.NoError(t, err)
	got, err := AddCellPackages(set, cell)
	require.NoError(t, err)
	assert.Equal(t, []string{"alpha", "beta", "gamma"}, []string{got[0].Name, got[1].Name, got[2].Name})
	assert.Len(t, set, 2, "the session's set is left as it was")

	for lock, want := range map[string]string{
		"alpha==1.1 --hash=" + hashA:                      "version changed",
		"alpha==1.0 --hash=" + hashB:                      "hashes changed",
		"alpha==1.0 --hash=" + hashA + " --hash=" + hashB: "hashes changed",
		"alpha[x]==1.0 --hash=" + hashA:                   "extras changed",
	} {
		c, err := ParseLock(lock)
		require.NoError(t, err)
		_, err = AddCellPackages(set, c)
		var tu *ToolUsageError
		require.ErrorAs(t, err, &tu, lock)
		assert.Contains(t, err.Error(), "session's alpha", lock)
		assert.Contains(t, err.Error(), want, lock)
	}
}

// A cell's packages: taken only where the policy offers packages, added to the session's set
// but never changing one of it, and bound by the cell's code digest (a cell without packages
// keeps the digest it always had).
func TestCheckCellPackages(t *testing.T) {
	p := Policy{Languages: []string{Python}, Packages: true}
	s, err := p.CheckSession(SessionRequest{Settings: Settings{Packages: "alpha==1.0 --hash=" + hashA}}, "docker")
	require.NoError(t, err)
	plain, err := p.CheckCell(s, 1, "", "import beta")
	require.NoError(t, err)
	assert.Equal(t, CellCodeDigest(Python, "import beta"), plain.CodeDigest)
	assert.Equal(t, "sha256:", plain.CodeDigest[:7])

	beta, err := ParseLock("beta==2.0 --hash=" + hashB)
	require.NoError(t, err)
	cell, err := p.CheckCell(s, 1, "", "import beta", beta...)
	require.NoError(t, err)
	assert.Equal(t, beta, cell.Packages)
	assert.NotEqual(t, plain.CodeDigest, cell.CodeDigest, "the cell's packages are part of its code digest")
	other, err := ParseLock("beta==2.0 --hash=" + hashA)
	require.NoError(t, err)
	assert.NotEqual(t, cell.CodeDigest, CellCodeDigest(Python, "import beta", other...), "one hash changed changes the digest")
	assert.False(t, cell.Equal(plain))
	assert.True(t, cell.Equal(cell))

	changed, err := ParseLock("alpha==1.1 --hash=" + hashA)
	require.NoError(t, err)
	_, err = p.CheckCell(s, 1, "", "import alpha", changed...)
	var tu *ToolUsageError
	require.ErrorAs(t, err, &tu)
	assert.Contains(t, err.Error(), "alpha")

	p.Packages = false
	_, err = p.CheckCell(s, 1, "", "import beta", beta...)
	var ce *ConfigError
	assert.ErrorAs(t, err, &ce)
}
