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
// only reports one when started from a GTID set, docs/binlog.md #3): begin
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

// mysqlGTIDs is a MySQL executed GTID set (go-mysql's type; slower; unit
// tested, not exercised by the MariaDB test server).
type mysqlGTIDs struct {
	set     *mysql.MysqlGTIDSet
	pending string
}

func (g *mysqlGTIDs) begin(ev mysql.BinlogGTIDEvent) error {
	switch e := ev.(type) {
	case *replication.GTIDEvent:
		if e.GNO == 0 { // an anonymous transaction (gtid_mode OFF): no GTID
			g.pending = ""
			return nil
		}
	case *replication.GtidTaggedLogEvent: // 8.4: uuid:tag:gno
	default:
		return fmt.Errorf("GTID event %T on a MySQL stream", ev)
	}
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

// NormalizeMySQLGTID is a MySQL GTID set (server_uuid:interval[:interval],
// ...) on one line in go-mysql's canonical form: SHOW MASTER STATUS and
// @@gtid_executed print one UUID per line, and the order of the UUIDs and
// intervals may differ between two prints of one set. A set that does not
// parse is returned with its white space removed.
func NormalizeMySQLGTID(s string) string {
	s = strings.Join(strings.Fields(s), "")
	set, err := mysql.ParseMysqlGTIDSet(s)
	if err != nil {
		return s
	}
	return set.String()
}

// SameGTIDSet reports whether a and b are the same GTID set of the flavor
// ("mariadb": the same domain-server-seq per domain; "mysql": the same
// transactions, whatever the order and line breaks).
func SameGTIDSet(flavor, a, b string) bool {
	if flavor != mysql.MariaDBFlavor {
		x, err1 := mysql.ParseGTIDSet(mysql.MySQLFlavor, strings.Join(strings.Fields(a), ""))
		y, err2 := mysql.ParseGTIDSet(mysql.MySQLFlavor, strings.Join(strings.Fields(b), ""))
		return err1 == nil && err2 == nil && x.Equal(y)
	}
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
