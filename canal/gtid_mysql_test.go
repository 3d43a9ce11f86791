package canal

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/stretchr/testify/require"
)

const (
	uuidA = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	uuidB = "9b1c5a4e-0d3f-11ef-8f5b-0242ac120002"
)

// gtid_executed as SHOW MASTER STATUS prints it on a server that has had
// two sources: one UUID per line. It becomes one line, canonical, and
// parses with go-mysql's MySQL flavor.
func TestNormalizeMySQLGTID(t *testing.T) {
	printed := uuidB + ":1-7,\n" + uuidA + ":1-5:11-18"
	got := NormalizeMySQLGTID(printed)
	require.Equal(t, uuidA+":1-5:11-18,"+uuidB+":1-7", got)
	set, err := mysql.ParseGTIDSet(mysql.MySQLFlavor, got)
	require.NoError(t, err)
	want, err := mysql.ParseGTIDSet(mysql.MySQLFlavor, uuidA+":11-18:1-5,"+uuidB+":1-3:4-7")
	require.NoError(t, err)
	require.True(t, set.Equal(want))
	require.Equal(t, "", NormalizeMySQLGTID(""))
	require.Equal(t, "not-a-set", NormalizeMySQLGTID(" not-a-set\n"))
}

func TestSameGTIDSet(t *testing.T) {
	a := uuidA + ":1-5:11-18,\n" + uuidB + ":1-7"
	require.True(t, SameGTIDSet(mysql.MySQLFlavor, a, uuidB+":1-7,"+uuidA+":1-5:11-18"))
	require.True(t, SameGTIDSet(mysql.MySQLFlavor, uuidA+":1-3:4-5", uuidA+":1-5")) // adjacent intervals merge
	require.False(t, SameGTIDSet(mysql.MySQLFlavor, a, uuidA+":1-5:11-18"))         // a UUID missing
	require.False(t, SameGTIDSet(mysql.MySQLFlavor, uuidA+":1-5", uuidA+":1-6"))
	require.False(t, SameGTIDSet(mysql.MySQLFlavor, "garbage", "garbage"))
	require.True(t, SameGTIDSet(mysql.MariaDBFlavor, "0-1-42,1-2-7", "1-2-7, 0-1-42"))
	require.False(t, SameGTIDSet(mysql.MariaDBFlavor, "0-1-42", "0-1-43"))
}

// The tailer's MySQL GTID tracker starts from a set (with line breaks, as
// saved from SHOW MASTER STATUS), folds in each committed transaction's
// GTID, forgets a discarded one, and its String is a set go-mysql parses
// back to the same transactions: what a resume by GTID is given.
func TestMySQLGTIDTracker(t *testing.T) {
	g, err := newGTIDTracker(mysql.MySQLFlavor, uuidA+":1-5,\n"+uuidB+":1-7")
	require.NoError(t, err)
	ev := func(sid string, gno int64) mysql.BinlogGTIDEvent {
		u, err := hex.DecodeString(strings.ReplaceAll(sid, "-", ""))
		require.NoError(t, err)
		return &replication.GTIDEvent{SID: u, GNO: gno}
	}
	require.NoError(t, g.begin(ev(uuidA, 6)))
	g.commit()
	require.NoError(t, g.begin(ev(uuidB, 8)))
	g.discard() // a stream restart: not committed
	g.commit()
	require.NoError(t, g.begin(&replication.GTIDEvent{SID: make([]byte, 16)})) // anonymous: gtid_mode OFF
	g.commit()
	require.Equal(t, uuidA+":1-6,"+uuidB+":1-7", g.String())
	set, err := mysql.ParseGTIDSet(mysql.MySQLFlavor, g.String())
	require.NoError(t, err)
	before, err := mysql.ParseGTIDSet(mysql.MySQLFlavor, uuidA+":1-5,"+uuidB+":1-7")
	require.NoError(t, err)
	require.True(t, set.Contain(before))
	require.False(t, before.Contain(set))

	require.Error(t, g.begin(&replication.MariadbGTIDEvent{}), "a MariaDB event on a MySQL stream")
	_, err = newGTIDTracker(mysql.MySQLFlavor, "0-1-42") // a MariaDB position given to a MySQL server
	require.ErrorContains(t, err, "parse GTID set")
}
