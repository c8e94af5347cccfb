package guard

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	hashA = "sha256:" + strings.Repeat("a", 64)
	hashB = "sha256:" + strings.Repeat("b", 64)
)

func TestParseLock(t *testing.T) {
	pkgs, err := ParseLock("# made by hand\nZeta.Lib==2.0 --hash=" + hashB + " --hash " + hashA + "\n" +
		"alpha_one[Fast,cli] == 1.0.post1 \\\n    --hash=" + hashA + "  # the first\n")
	require.NoError(t, err)
	assert.Equal(t, []Package{
		{Name: "alpha-one", Version: "1.0.post1", Extras: []string{"cli", "fast"}, Hashes: []string{hashA}},
		{Name: "zeta-lib", Version: "2.0", Hashes: []string{hashA, hashB}},
	}, pkgs)

	for lock, want := range map[string]string{
		"a==1":                   "no hash",
		"a>=1 --hash=" + hashA:   "pinned",
		"a===1 --hash=" + hashA:  "pinned",
		"a==1.* --hash=" + hashA: "exact version",
		"a==1 --hash=md5:00":     "not \"sha256",
		"a==1 --hash=sha256:" + strings.Repeat("A", 64):        "not \"sha256",
		"a==1 --hash=" + hashA + "\nA==2 --hash=" + hashB:      "twice",
		"-i https://evil.example/simple\na==1 --hash=" + hashA: "option",
		"a==1 --hash=" + hashA + " --index-url=http://x":       "option",
		"https://x.example/a.whl --hash=" + hashA:              "pinned",
		"a==1 ; python_version < '4' --hash=" + hashA:          "markers",
		"-e ./src":                                  "option",
		"./a-1-py3-none-any.whl --hash=" + hashA:    "pinned",
		"a==1 --hash=" + hashA + " --hash=" + hashA: "twice",
	} {
		_, err := ParseLock(lock)
		require.Error(t, err, lock)
		var tu *ToolUsageError
		assert.ErrorAs(t, err, &tu, lock)
		assert.Contains(t, err.Error(), want, lock)
	}
}

func TestPackagesAreApprovedAndNeedAnIndex(t *testing.T) {
	req := Request{Code: "import a", Settings: Settings{Packages: "a==1 --hash=" + hashA}}
	_, err := Policy{}.Check(req, "docker")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--package-index")

	p := Policy{}
	p.Packages = true
	c, err := p.Check(req, "docker")
	require.NoError(t, err)
	plain, err := p.Check(Request{Code: "import a"}, "docker")
	require.NoError(t, err)
	assert.NotEqual(t, plain.Digest, c.Digest)
	assert.Equal(t, c.Packages, c.Summary().Packages)

	other := c
	other.Packages = []Package{{Name: "a", Version: "1", Hashes: []string{hashB}}}
	assert.ErrorContains(t, p.Recheck(other), "digest mismatch")
	other.Packages = []Package{{Name: "A", Version: "1", Hashes: []string{hashA}}}
	assert.ErrorContains(t, p.Recheck(other), "normalized")
}
