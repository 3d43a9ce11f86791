package canal

import (
	"context"
	"database/sql"
	"strings"
)

// ResumePoint chooses how to resume from a saved position. A GTID start
// costs go-mysql 15–25% more CPU per event than a file/offset start
// (BINLOG-NOTES #10), so when the server proves that p's file and offset
// are the same point as p's GTID (BINLOG_GTID_POS(file, offset) equals it:
// same server, file not purged) it returns p without its GTID and the
// tailer streams by file and offset. Otherwise (another server after a
// failover, a purged file, MySQL) it returns p as is: by GTID.
func ResumePoint(ctx context.Context, db *sql.DB, p Position) Position {
	if p.GTID == "" || p.File == "" {
		return p
	}
	g, err := binlogGTIDPos(ctx, db, p.File, p.Pos)
	if err != nil || !sameGTIDSet(g, p.GTID) {
		return p
	}
	return Position{File: p.File, Pos: p.Pos}
}

func sameGTIDSet(a, b string) bool {
	norm := func(s string) map[string]bool {
		out := map[string]bool{}
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out[part] = true
			}
		}
		return out
	}
	x, y := norm(a), norm(b)
	if len(x) != len(y) {
		return false
	}
	for k := range x {
		if !y[k] {
			return false
		}
	}
	return true
}
