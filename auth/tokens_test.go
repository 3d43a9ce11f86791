package auth_test

import (
	"errors"
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
		assert.Error(t, reload(toks, file, strong))
		_, ok = toks.Lookup(alice)
		assert.True(t, ok)
	}
	// a reload: bob becomes an admin, alice is gone
	write("bob admin " + auth.Digest(bob))
	require.NoError(t, reload(toks, file, ""))
	_, ok = toks.Lookup(alice)
	assert.False(t, ok)
	id, _ = toks.Lookup(bob)
	assert.Equal(t, auth.Admin, id.Role)
	// a weak COUPONLINK_API_TOKEN is refused
	_, err = auth.Load("", "CHANGE-ME")
	assert.ErrorIs(t, err, auth.ErrWeak)
}

// aliceTokens is a token file (mode 0600) of one token, alice's as an
// operator, and the tokens loaded from it.
func aliceTokens(t *testing.T) (file, alice string, toks *auth.Tokens) {
	t.Helper()
	file = filepath.Join(t.TempDir(), "tokens")
	alice = auth.NewToken()
	require.NoError(t, os.WriteFile(file, []byte("alice operator "+auth.Digest(alice)+"\n"), 0o600))
	toks, err := auth.Load(file, "")
	require.NoError(t, err)
	return file, alice, toks
}

// reload is what the api does on SIGHUP: Load, then Replace.
func reload(toks *auth.Tokens, file, envToken string) error {
	next, err := auth.Load(file, envToken)
	if err != nil {
		return err
	}
	return toks.Replace(next)
}

// A token file with no token is refused, at start and on reload, even
// beside COUPONLINK_API_TOKEN: the file was meant to hold the tokens.
func TestTokenFileWithNoTokenIsRefused(t *testing.T) {
	file, alice, toks := aliceTokens(t)
	for _, empty := range []string{"", "\n\n", "# nobody yet\n", "  # indented comment\n\n\t\n#alice operator " + auth.Digest(alice) + "\n"} {
		require.NoError(t, os.WriteFile(file, []byte(empty), 0o600))
		for _, env := range []string{"", strong} {
			_, err := auth.Load(file, env)
			require.ErrorIs(t, err, auth.ErrNoTokens, "%q", empty)
			assert.Contains(t, err.Error(), file)
			assert.Contains(t, err.Error(), "couponlink token new")
			assert.Contains(t, err.Error(), "-insecure-no-auth")
			assert.ErrorIs(t, reload(toks, file, env), auth.ErrNoTokens)
		}
		_, ok := toks.Lookup(alice)
		assert.True(t, ok, "a refused reload keeps the tokens in use")
	}
}

// A token file its group or everyone may write, or that another user
// owns, is refused with the command that fixes it; the tokens in use stay.
func TestTokenFileOthersMayChangeIsRefused(t *testing.T) {
	file, alice, toks := aliceTokens(t)
	for _, mode := range []os.FileMode{0o666, 0o620, 0o602, 0o660, 0o622} {
		require.NoError(t, os.Chmod(file, mode))
		_, err := auth.Load(file, "")
		require.ErrorIs(t, err, auth.ErrUnsafeFile, "%04o", mode)
		assert.Contains(t, err.Error(), "chmod go-w "+file)
		assert.Contains(t, err.Error(), "chmod 600 "+file)
		assert.ErrorIs(t, reload(toks, file, ""), auth.ErrUnsafeFile)
		_, ok := toks.Lookup(alice)
		assert.True(t, ok, "a refused reload keeps the tokens in use")
	}
	for _, mode := range []os.FileMode{0o600, 0o400, 0o640, 0o644} {
		require.NoError(t, os.Chmod(file, mode))
		_, err := auth.Load(file, "")
		assert.NoError(t, err, "%04o", mode)
	}

	if os.Geteuid() != 0 {
		t.Skip("giving the file to another user needs root")
	}
	require.NoError(t, os.Chmod(file, 0o600))
	require.NoError(t, os.Chown(file, 12345, 12345))
	_, err := auth.Load(file, "")
	require.ErrorIs(t, err, auth.ErrUnsafeFile)
	assert.Contains(t, err.Error(), "uid 12345")
	assert.Contains(t, err.Error(), "chown ")
	assert.ErrorIs(t, reload(toks, file, ""), auth.ErrUnsafeFile)
	require.NoError(t, os.Chown(file, 0, 12345)) // root's: fine
	_, err = auth.Load(file, "")
	assert.NoError(t, err)
}

// Replace never goes from some tokens to none (that would open the API).
func TestReplaceKeepsTheLastToken(t *testing.T) {
	toks := auth.Static(map[string]auth.Identity{strong: {Name: "ops", Role: auth.Admin}})
	err := toks.Replace(auth.Static(nil))
	require.True(t, errors.Is(err, auth.ErrLastToken), "%v", err)
	assert.Contains(t, err.Error(), "-insecure-no-auth")
	_, ok := toks.Lookup(strong)
	assert.True(t, ok)
	other := auth.NewToken()
	require.NoError(t, toks.Replace(auth.Static(map[string]auth.Identity{other: {Name: "x", Role: auth.Viewer}})))
	_, ok = toks.Lookup(strong)
	assert.False(t, ok)
	open := auth.Static(nil)
	assert.NoError(t, open.Replace(auth.Static(nil)), "none to none stays open")
	assert.Equal(t, 0, open.Len())
}
