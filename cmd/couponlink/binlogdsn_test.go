package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// -binlog-dsn: the tailer connects to the replica with the replica's
// address and credentials, and takes the database of -dsn when the binlog
// DSN names none (unqualified tables of the mapping live there).
func TestTailerConfigBinlogDSN(t *testing.T) {
	for _, tc := range []struct{ name, dsn, binlog, addr, user, schema string }{
		{"same server", "cl:pw@tcp(primary:3306)/couponlink", "", "primary:3306", "cl", "couponlink"},
		{"a replica", "cl:pw@tcp(primary:3306)/couponlink", "rd:x@tcp(replica:3306)/couponlink", "replica:3306", "rd", "couponlink"},
		{"a replica, no database", "cl:pw@tcp(primary:3306)/couponlink", "rd:x@tcp(replica:3307)/", "replica:3307", "rd", "couponlink"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tailerConfig(tc.dsn, tc.binlog, 7)
			require.NoError(t, err)
			require.Equal(t, tc.addr, c.Addr)
			require.Equal(t, tc.user, c.User)
			require.Equal(t, tc.schema, c.Schema)
			require.EqualValues(t, 7, c.ServerID)
		})
	}
	_, err := tailerConfig("cl:pw@tcp(primary:3306)/couponlink", "rd:x@bogus(", 0)
	require.ErrorContains(t, err, "-binlog-dsn")
}
