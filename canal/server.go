package canal

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Server is what couponlink needs to know of a source server's kind: its
// flavor (MariaDB or MySQL, Percona Server counting as MySQL) and version,
// from SELECT VERSION(), e.g. "10.11.19-MariaDB-deb12", "8.0.36",
// "8.4.3", "5.7.44-log", "8.0.35-27" (Percona).
type Server struct {
	Version             string // as the server prints it
	MariaDB             bool
	Major, Minor, Patch int
}

// ParseServer reads a SELECT VERSION() string.
func ParseServer(version string) Server {
	s := Server{Version: version, MariaDB: strings.Contains(strings.ToLower(version), "mariadb")}
	num := version
	if i := strings.IndexFunc(num, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }); i >= 0 {
		num = num[:i]
	}
	parts := strings.SplitN(num, ".", 3)
	for i, dst := range []*int{&s.Major, &s.Minor, &s.Patch} {
		if i < len(parts) {
			*dst, _ = strconv.Atoi(parts[i])
		}
	}
	// MariaDB 10.x behind a replication proxy may print 5.5.5-10.x-MariaDB
	if s.MariaDB && s.Major == 5 && s.Minor == 5 && s.Patch == 5 && strings.HasPrefix(version, "5.5.5-") {
		inner := ParseServer(strings.TrimPrefix(version, "5.5.5-"))
		s.Major, s.Minor, s.Patch = inner.Major, inner.Minor, inner.Patch
	}
	return s
}

// ReadServer asks the server its version.
func ReadServer(ctx context.Context, q queryer) (Server, error) {
	var v string
	if err := q.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return Server{}, fmt.Errorf("read server version: %w", err)
	}
	return ParseServer(v), nil
}

// Flavor is go-mysql's flavor of the server: "mariadb" or "mysql".
func (s Server) Flavor() string {
	if s.MariaDB {
		return mysql.MariaDBFlavor
	}
	return mysql.MySQLFlavor
}

// AtLeast reports whether the server's version is major.minor or later.
func (s Server) AtLeast(major, minor int) bool {
	return s.Major > major || s.Major == major && s.Minor >= minor
}

// BinlogStatusStatement is the statement that prints the binlog's current
// file and offset: SHOW MASTER STATUS, except on MySQL 8.2 and later, where
// it is SHOW BINARY LOG STATUS (8.2 added it; 8.4 removed the old name).
// MariaDB keeps SHOW MASTER STATUS (SHOW BINLOG STATUS is its 10.5.2 alias).
func (s Server) BinlogStatusStatement() string {
	if !s.MariaDB && s.AtLeast(8, 2) {
		return "SHOW BINARY LOG STATUS"
	}
	return "SHOW MASTER STATUS"
}

// GTIDVariable is the global variable holding the GTID set of everything
// in the server's binlog: gtid_binlog_pos on MariaDB, gtid_executed on
// MySQL (the Executed_Gtid_Set of SHOW MASTER STATUS).
func (s Server) GTIDVariable() string {
	if s.MariaDB {
		return "gtid_binlog_pos"
	}
	return "gtid_executed"
}

func (s Server) String() string {
	if s.MariaDB {
		return "MariaDB " + s.Version
	}
	return "MySQL " + s.Version
}
