package auth_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/auth"
)

const strong = "3f7a9c1e5b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a1c3e5b7d9f2a4c6e8b0d1f3a" // 64 hex digits

func TestCheckRefusesWeakAndPlaceholderTokens(t *testing.T) {
	for _, weak := range []string{"CHANGE-ME", "changeme", "secret", "s3cret-token", strings.Repeat("a", 100),
		"0123456789abcdef0123456789abcdef", // 32 hex digits: 16 bytes
		"CHANGE-ME-" + strong, strong[:40] + "secret" + strong[:30]} {
		assert.ErrorIs(t, auth.Check(weak), auth.ErrWeak, "%q", weak)
	}
	for _, good := range []string{strong, "Xq7_v9Lm2-Kp4Rz8Nw1Bt6Yh3Jd5Fg0Sa7Ce2Qu9Vi4"} { // hex, 43 base64url
		assert.NoError(t, auth.Check(good), "%q", good)
	}
	assert.NoError(t, auth.Check(auth.NewToken()))
}

func TestTokenFileLoadLookupReload(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	alice, bob := auth.NewToken(), auth.NewToken()
	write := func(lines ...string) {
		require.NoError(t, os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	}
	write("# people", "alice operator "+auth.Digest(alice), "", "bob viewer "+auth.Digest(bob))
	toks, err := auth.Load(file, strong)
	require.NoError(t, err)
	assert.Equal(t, 3, toks.Len())
	id, ok := toks.Lookup(alice)
	assert.True(t, ok)
	assert.Equal(t, auth.Identity{Name: "alice", Role: auth.Operator}, id)
	id, ok = toks.Lookup(strong)
	assert.True(t, ok)
	assert.Equal(t, auth.Identity{Name: auth.EnvTokenName, Role: auth.Admin}, id)
	_, ok = toks.Lookup(alice + "x")
	assert.False(t, ok)
	_, ok = toks.Lookup("")
	assert.False(t, ok)

	// the file holds digests only: a token in clear is refused, and so is a bad line
	for _, bad := range []string{"alice operator " + alice, "alice boss " + auth.Digest(alice), "alice operator", "a b c d",
		"alice operator " + auth.Digest(alice) + "\nalice viewer " + auth.Digest(bob)} {
		write(bad)
		_, err := auth.Load(file, "")
		assert.Error(t, err, bad)
		assert.NotContains(t, err.Error(), alice, "an error never shows a token")
		// a reload that fails keeps the tokens in use
		assert.Error(t, toks.Reload(file, strong))
		_, ok = toks.Lookup(alice)
		assert.True(t, ok)
	}
	// a reload: bob becomes an admin, alice is gone
	write("bob admin " + auth.Digest(bob))
	require.NoError(t, toks.Reload(file, ""))
	_, ok = toks.Lookup(alice)
	assert.False(t, ok)
	id, _ = toks.Lookup(bob)
	assert.Equal(t, auth.Admin, id.Role)
	// a weak COUPONLINK_API_TOKEN is refused
	_, err = auth.Load("", "CHANGE-ME")
	assert.ErrorIs(t, err, auth.ErrWeak)
}
