package canal

import (
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/stretchr/testify/require"
)

// The statement that prints the binlog's file and offset, and the GTID
// variable, per server kind and version.
func TestServerStatements(t *testing.T) {
	for _, c := range []struct {
		version, flavor, status, gtid string
		major, minor                  int
	}{
		{"5.7.44-log", mysql.MySQLFlavor, "SHOW MASTER STATUS", "gtid_executed", 5, 7},
		{"8.0.36", mysql.MySQLFlavor, "SHOW MASTER STATUS", "gtid_executed", 8, 0},
		{"8.0.35-27", mysql.MySQLFlavor, "SHOW MASTER STATUS", "gtid_executed", 8, 0}, // Percona Server
		{"8.1.0", mysql.MySQLFlavor, "SHOW MASTER STATUS", "gtid_executed", 8, 1},
		{"8.2.0", mysql.MySQLFlavor, "SHOW BINARY LOG STATUS", "gtid_executed", 8, 2},
		{"8.4.3", mysql.MySQLFlavor, "SHOW BINARY LOG STATUS", "gtid_executed", 8, 4},
		{"9.1.0-commercial", mysql.MySQLFlavor, "SHOW BINARY LOG STATUS", "gtid_executed", 9, 1},
		{"10.11.19-MariaDB-deb12", mysql.MariaDBFlavor, "SHOW MASTER STATUS", "gtid_binlog_pos", 10, 11},
		{"11.4.2-MariaDB", mysql.MariaDBFlavor, "SHOW MASTER STATUS", "gtid_binlog_pos", 11, 4},
		{"5.5.5-10.6.12-MariaDB-log", mysql.MariaDBFlavor, "SHOW MASTER STATUS", "gtid_binlog_pos", 10, 6},
	} {
		s := ParseServer(c.version)
		require.Equal(t, c.flavor, s.Flavor(), c.version)
		require.Equal(t, c.status, s.BinlogStatusStatement(), c.version)
		require.Equal(t, c.gtid, s.GTIDVariable(), c.version)
		require.Equal(t, [2]int{c.major, c.minor}, [2]int{s.Major, s.Minor}, c.version)
	}
}

func TestParseSnapshotMethod(t *testing.T) {
	for in, want := range map[string]SnapshotMethod{"": SnapshotAuto, "auto": SnapshotAuto, "STATUS": SnapshotStatus,
		" lock ": SnapshotLock, "tables": SnapshotTables} {
		got, err := ParseSnapshotMethod(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err := ParseSnapshotMethod("ftwrl")
	require.ErrorContains(t, err, "want auto, status, lock or tables")
}
