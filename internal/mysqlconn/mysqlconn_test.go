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
		"root@tcp(127.0.0.1:3307)/couponlink?x=a@b":    "root@tcp(127.0.0.1:3307)/couponlink?x=a@b",
		"app:pw@tcp(db:3306)/couponlink?x=a@b":         "app:xxxxx@tcp(db:3306)/couponlink?x=a@b",
		"app:Top/Secret9@tcp(db:3306)":                 "app:xxxxx@tcp(db:3306)",
		"app:Top/Secret9@db":                           "app:xxxxx@db",
		"app:Secret9":                                  "app:xxxxx",
		"app:Secret9/couponlink":                       "app:xxxxx/couponlink",
		"tcp(db:3306)/couponlink":                      "tcp(db:3306)/couponlink",
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
		"app:Top/Secret9@tcp(db:3306)",     // the driver reads "app:Top" as the network
		"app:TopSecret9/x%zz@tcp(db:3306)", // and "x%zz@tcp(db:3306)" as a database name
		"app:TopSecret9",
	} {
		_, err := Config(dsn)
		require.Error(t, err, dsn)
		for _, piece := range []string{"TopSecret9", "Top", "Secret9"} {
			assert.NotContains(t, err.Error(), piece)
		}
		assert.True(t, strings.Contains(err.Error(), "app:xxxxx"), err.Error())
		_, err = Open(dsn, 1)
		require.Error(t, err, dsn)
		assert.NotContains(t, err.Error(), "TopSecret9")
	}
}
