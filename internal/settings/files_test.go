package settings

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeFile writes content to a file of the test's and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// unsetAll unsets the variables for the test (the servers' exports do not
// count).
func unsetAll(t *testing.T, envs ...string) {
	for _, e := range envs {
		t.Setenv(e, "")
		require.NoError(t, os.Unsetenv(e))
	}
}

// fileFlags is a flag set with the Database and Redis groups and a secret
// of its own.
func fileFlags(out *bytes.Buffer) (*Flags, *Database, *Redis, func() string) {
	f := New("couponlink t", "", out)
	var (
		db Database
		r  Redis
	)
	f.Add(&db, &r)
	return f, &db, &r, f.EnvSecret("secret", "COUPONLINK_T_SECRET", "a key")
}

var fileVars = []string{"COUPONLINK_MYSQL_DSN", "COUPONLINK_REDIS_ADDR", "COUPONLINK_REDIS_PASSWORD", "COUPONLINK_T_SECRET",
	"COUPONLINK_MYSQL_DSN_FILE", "COUPONLINK_REDIS_ADDR_FILE", "COUPONLINK_REDIS_PASSWORD_FILE", "COUPONLINK_T_SECRET_FILE"}

// Every secret and redacted setting is read from the file its VAR_FILE
// names, less one trailing newline (\n or \r\n), when VAR is unset; the
// command line still wins; -h shows no file's content.
func TestFileVariables(t *testing.T) {
	unsetAll(t, fileVars...)
	t.Setenv("COUPONLINK_MYSQL_DSN_FILE", writeFile(t, "dsn", "cl:Hush-1@tcp(db:3306)/couponlink\n"))
	t.Setenv("COUPONLINK_REDIS_ADDR_FILE", writeFile(t, "addr", "redis://:Hush-2@redis:6379\r\n"))
	t.Setenv("COUPONLINK_REDIS_PASSWORD_FILE", writeFile(t, "pw", "Hush-3\n\n"))
	t.Setenv("COUPONLINK_T_SECRET_FILE", writeFile(t, "secret", " Hush-4 "))
	var out bytes.Buffer
	f, db, r, secret := fileFlags(&out)
	f.Usage()
	assert.NotContains(t, out.String(), "Hush")
	require.NoError(t, f.Parse(nil))
	assert.Equal(t, "cl:Hush-1@tcp(db:3306)/couponlink", *db.DSN)
	assert.Equal(t, "redis://:Hush-2@redis:6379", *r.Addr, "\\r\\n trimmed")
	assert.Equal(t, "Hush-3\n", r.Password(), "one newline trimmed, no more")
	assert.Equal(t, " Hush-4 ", secret(), "blanks kept")
	assert.Equal(t, "COUPONLINK_REDIS_PASSWORD_FILE", f.FileEnv("redis-password"))
	assert.Equal(t, "COUPONLINK_MYSQL_DSN_FILE", f.FileEnv("dsn"))
	assert.Equal(t, "", f.FileEnv("redis-username"), "not a secret")
	assert.Equal(t, "Hush-3\n", r.Options().Password)

	f, _, r, _ = fileFlags(&out)
	require.NoError(t, f.Parse([]string{"-redis-password", "given"}))
	assert.Equal(t, "given", r.Password(), "the command line wins")
}

// VAR and VAR_FILE both set are refused; a file that cannot be read is
// refused naming VAR_FILE and the path; neither error shows a value.
func TestFileVariableErrors(t *testing.T) {
	unsetAll(t, fileVars...)
	missing := filepath.Join(t.TempDir(), "nope")
	for name, c := range map[string]struct {
		env  map[string]string
		want string
	}{
		"both": {map[string]string{"COUPONLINK_REDIS_PASSWORD": "Hush-5", "COUPONLINK_REDIS_PASSWORD_FILE": writeFile(t, "pw", "Hush-6")},
			"bad environment: both COUPONLINK_REDIS_PASSWORD and COUPONLINK_REDIS_PASSWORD_FILE are set: set one of them (the value, or the file holding it)\n"},
		"both, redacted": {map[string]string{"COUPONLINK_MYSQL_DSN": "a:Hush-7@tcp(h:1)/d", "COUPONLINK_MYSQL_DSN_FILE": missing},
			"bad environment: both COUPONLINK_MYSQL_DSN and COUPONLINK_MYSQL_DSN_FILE are set"},
		"missing": {map[string]string{"COUPONLINK_REDIS_ADDR_FILE": missing},
			"bad environment: COUPONLINK_REDIS_ADDR_FILE: cannot read " + missing + ": no such file or directory\n"},
		"a directory": {map[string]string{"COUPONLINK_T_SECRET_FILE": t.TempDir()},
			"bad environment: COUPONLINK_T_SECRET_FILE: cannot read "},
	} {
		t.Run(name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			var out bytes.Buffer
			f, _, _, _ := fileFlags(&out)
			require.ErrorIs(t, f.Parse(nil), ErrUsage)
			assert.Contains(t, out.String(), c.want)
			assert.NotContains(t, out.String(), "Hush")
		})
	}
}

// A VAR_FILE that is another flag's variable is that flag's alone: the
// api's -token-file [COUPONLINK_API_TOKEN_FILE] is a file of tokens, not
// -token's value.
func TestFileVariableOfAnotherFlag(t *testing.T) {
	unsetAll(t, "COUPONLINK_T_TOKEN")
	t.Setenv("COUPONLINK_T_TOKEN_FILE", writeFile(t, "tokens", "admin admin sha256:00\n"))
	f := New("couponlink t", "", &bytes.Buffer{})
	token := f.EnvSecret("token", "COUPONLINK_T_TOKEN", "a token")
	file := f.EnvString("token-file", "COUPONLINK_T_TOKEN_FILE", "", "tokens")
	require.NoError(t, f.Parse(nil))
	assert.Equal(t, "", f.FileEnv("token"))
	assert.Equal(t, "", token())
	assert.NotEmpty(t, *file)
}
