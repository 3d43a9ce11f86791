package sink

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
)

// After a resume from another server's binlog position (a failover), the
// Redis writes are stamped 0 while the sink stands at that position — its
// stamp may be higher than any position of the new server's binlog — and
// by their own position from the first commit on.
func TestStampOfAfterForeignResume(t *testing.T) {
	foreign := canal.Position{File: "mysql-bin.000009", Pos: 900_000, GTID: "0-1-500"}
	here := canal.Position{File: "mysql-bin.000001", Pos: 4_000, GTID: "0-2-1"}
	r := &stock{}
	require.Equal(t, inventory.Stamp(foreign), r.stampOf(foreign), "no failover: the position's own stamp")
	r.foreign = foreign
	require.Zero(t, r.stampOf(foreign), "a heartbeat before the first commit")
	require.Zero(t, r.stampOf(foreign))
	require.Equal(t, inventory.Stamp(here), r.stampOf(here), "the first commit on the new server")
	require.True(t, r.foreign.IsZero())
	require.Equal(t, inventory.Stamp(foreign), r.stampOf(foreign), "once moved on, a position is stamped as it is")
}
