package canal

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// gtidTracker keeps the GTID set of the committed transactions itself (go-mysql
// only reports one when started from a GTID set, BINLOG-NOTES #3): begin
// records the GTID of the transaction that starts, commit folds it in.
// begin is called by the reader alone; commit and String under the
// batcher's lock.
type gtidTracker interface {
	begin(ev mysql.BinlogGTIDEvent) error
	commit()
	discard() // forget a begun, uncommitted transaction (stream restart)
	String() string
}

// newGTIDTracker starts from the set s ("" = nothing known yet).
func newGTIDTracker(flavor, s string) (gtidTracker, error) {
	if flavor == mysql.MariaDBFlavor {
		return parseMariaGTIDs(s)
	}
	set, err := mysql.ParseMysqlGTIDSet(s)
	if err != nil {
		return nil, fmt.Errorf("parse GTID set %q: %w", s, err)
	}
	return &mysqlGTIDs{set: set.(*mysql.MysqlGTIDSet)}, nil
}

// mariaGTID is one domain's position: domain-server-seq.
type mariaGTID struct {
	domain, server uint32
	seq            uint64
}

// mariaGTIDs is a MariaDB GTID position: the last GTID of each domain,
// sorted by domain. Commit is allocation-free; the string is built only
// when a batch is handed over and the set changed.
type mariaGTIDs struct {
	doms       []mariaGTID
	pending    mariaGTID
	hasPending bool
	str        string
	dirty      bool
}

func parseMariaGTIDs(s string) (*mariaGTIDs, error) {
	g := &mariaGTIDs{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		f := strings.Split(part, "-")
		if len(f) != 3 {
			return nil, fmt.Errorf("MariaDB GTID %q: want domain-server-seq", part)
		}
		d, err1 := strconv.ParseUint(f[0], 10, 32)
		sv, err2 := strconv.ParseUint(f[1], 10, 32)
		seq, err3 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("MariaDB GTID %q: want domain-server-seq numbers", part)
		}
		g.set(mariaGTID{uint32(d), uint32(sv), seq})
	}
	g.dirty = true
	return g, nil
}

func (g *mariaGTIDs) set(x mariaGTID) {
	for i := range g.doms {
		if g.doms[i].domain == x.domain {
			g.doms[i] = x
			return
		}
	}
	g.doms = append(g.doms, x)
	slices.SortFunc(g.doms, func(a, b mariaGTID) int { return int(int64(a.domain) - int64(b.domain)) })
}

func (g *mariaGTIDs) begin(ev mysql.BinlogGTIDEvent) error {
	e, ok := ev.(*replication.MariadbGTIDEvent)
	if !ok {
		return fmt.Errorf("GTID event %T on a MariaDB stream", ev)
	}
	g.pending = mariaGTID{e.GTID.DomainID, e.GTID.ServerID, e.GTID.SequenceNumber}
	g.hasPending = true
	return nil
}

func (g *mariaGTIDs) commit() {
	if !g.hasPending {
		return
	}
	g.hasPending = false
	if len(g.doms) == 1 && g.doms[0].domain == g.pending.domain { // the common case
		g.doms[0] = g.pending
	} else {
		g.set(g.pending)
	}
	g.dirty = true
}

func (g *mariaGTIDs) discard() { g.hasPending = false }

func (g *mariaGTIDs) String() string {
	if !g.dirty {
		return g.str
	}
	var sb strings.Builder
	for i, d := range g.doms {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.FormatUint(uint64(d.domain), 10))
		sb.WriteByte('-')
		sb.WriteString(strconv.FormatUint(uint64(d.server), 10))
		sb.WriteByte('-')
		sb.WriteString(strconv.FormatUint(d.seq, 10))
	}
	g.str, g.dirty = sb.String(), false
	return g.str
}

// mysqlGTIDs is a MySQL executed GTID set (go-mysql's type; slower, and
// not exercised by the MariaDB test server).
type mysqlGTIDs struct {
	set     *mysql.MysqlGTIDSet
	pending string
}

func (g *mysqlGTIDs) begin(ev mysql.BinlogGTIDEvent) error {
	next, err := ev.GTIDNext()
	if err != nil {
		return fmt.Errorf("read GTID event: %w", err)
	}
	g.pending = next.String()
	return nil
}

func (g *mysqlGTIDs) commit() {
	if g.pending == "" {
		return
	}
	_ = g.set.Update(g.pending) // it came from GTIDNext: it parses
	g.pending = ""
}

func (g *mysqlGTIDs) discard() { g.pending = "" }

func (g *mysqlGTIDs) String() string { return g.set.String() }
