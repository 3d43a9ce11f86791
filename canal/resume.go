package canal

import (
	"context"
	"database/sql"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// ResumePoint chooses how to resume from a saved position. A GTID start
// costs go-mysql 15–25% more CPU per event than a file/offset start
// (docs/binlog.md #10), so when a MariaDB server proves that p's file and
// offset are the same point as p's GTID (BINLOG_GTID_POS(file, offset)
// equals it: same server, file not purged) it returns p without its GTID
// and the tailer streams by file and offset. Otherwise (another server
// after a failover, a purged file) it returns p as is: by GTID. MySQL has
// no BINLOG_GTID_POS, so nothing proves a file/offset against a GTID set
// there: a MySQL position with a GTID set always resumes by GTID (which
// also survives a failover to another server of the topology).
func ResumePoint(ctx context.Context, db *sql.DB, p Position) Position {
	if p.GTID == "" || p.File == "" {
		return p
	}
	srv, err := ReadServer(ctx, db)
	if err != nil || !srv.MariaDB {
		return p
	}
	g, err := binlogGTIDPos(ctx, db, p.File, p.Pos)
	if err != nil || !SameGTIDSet(mysql.MariaDBFlavor, g, p.GTID) {
		return p
	}
	return Position{File: p.File, Pos: p.Pos}
}
