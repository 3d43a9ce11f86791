package mysqlconn

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRedact(t *testing.T) {
	for dsn, want := range map[string]string{
		"app:s3cret@tcp(db:3306)/couponlink":           "app:xxxxx@tcp(db:3306)/couponlink",
		"app:p@ss/w@rd@tcp(db:3306)/couponlink?x=1":    "app:xxxxx@tcp(db:3306)/couponlink?x=1",
		"root@tcp(127.0.0.1:3307)/couponlink":          "root@tcp(127.0.0.1:3307)/couponlink",
		"app:s3cret@tcp(db:3306":                       "app:xxxxx@tcp(db:3306",
		"app:s3cret@tcp(db:3306)couponlink":            "app:xxxxx@tcp(db:3306)couponlink",
		"app:s3cret@unix(/run/mysqld.sock)/couponlink": "app:xxxxx@unix(/run/mysqld.sock)/couponlink",
		"no password here":                             "no password here",
		"":                                             "",
	} {
		assert.Equal(t, want, Redact(dsn), dsn)
	}
}

func TestConfigForcesSettings(t *testing.T) {
	cfg, err := Config("app:pw@tcp(db:3306)/couponlink?clientFoundRows=true&parseTime=false&interpolateParams=false")
	require.NoError(t, err)
	assert.False(t, cfg.ClientFoundRows, "clientFoundRows must be forced off: the guards read rows affected")
	assert.True(t, cfg.ParseTime)
	assert.True(t, cfg.InterpolateParams)
	assert.Equal(t, "UTC", cfg.Loc.String())
}

func TestConfigErrorHidesPassword(t *testing.T) {
	for _, dsn := range []string{
		"app:TopSecret9@tcp(db:3306",            // no closing brace
		"app:TopSecret9@tcp(db:3306)couponlink", // no slash
		"app:TopSecret9@tcp(db:3306)/couponlink?parseTime=maybe",
	} {
		_, err := Config(dsn)
		require.Error(t, err, dsn)
		assert.NotContains(t, err.Error(), "TopSecret9")
		assert.True(t, strings.Contains(err.Error(), "app:xxxxx@"), err.Error())
		_, err = Open(dsn, 1)
		require.Error(t, err, dsn)
		assert.NotContains(t, err.Error(), "TopSecret9")
	}
}
