package inventory

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/couponlink/couponlink/canal"
)

// A snapshot's count of user_coupon is one walk of the (template,
// channel, status) index: on a large shop the longest read of a pass, and
// one thread of the server however many cores it has. Snapshot splits it
// over up to SnapshotReaders transactions whose snapshots are the same
// (canal.JoinSnapshot: each started on a connection of its own and kept
// only when its binlog_snapshot position is the snapshot's, i.e. no
// binlogged commit came in between), each counting ranges of template ids
// in turn: several cores count, and several page reads are in flight when
// the index is not all in the buffer pool. The ranges cover every id
// (the first and last are open-ended), so the counts are exactly those of
// one walk. Where the server has no binlog_snapshot status (Oracle MySQL)
// or commits keep coming in between, fewer readers join, down to the
// snapshot's own transaction alone.

// DefaultSnapshotReaders is how many transactions count a snapshot's
// coupons unless SetSnapshotReaders says otherwise.
const DefaultSnapshotReaders = 4

var snapshotReaders atomic.Int32

func init() { snapshotReaders.Store(DefaultSnapshotReaders) }

// SetSnapshotReaders sets how many transactions, at most, count the
// coupons of a Snapshot (1: the snapshot's own alone), and returns the
// previous setting.
func SetSnapshotReaders(n int) (previous int) {
	return int(snapshotReaders.Swap(int32(max(1, n))))
}

const (
	// rangesPerReader: the ranges of template ids a reader counts in turn,
	// so that a reader done early takes over ranges of the others
	rangesPerReader = 8
	// connWait bounds the wait for a reader's connection: a pool that is
	// all in use (or of one connection) leaves the count to fewer readers
	connWait = time.Second
)

// joinReaders starts up to n-1 more transactions at the snapshot pos of
// tx; end rolls them back and returns their connections. The readers
// start at once, each on its own connection, so that a join needs one
// quiet round trip, not n-1 of them in a row; one that missed pos has
// missed it for good (positions only grow) and is not tried again.
func joinReaders(ctx context.Context, db *sql.DB, pos canal.Position, n int) (txs []*sql.Tx, end func()) {
	var conns []*sql.Conn
	end = func() {
		for _, tx := range txs {
			_ = tx.Rollback()
		}
		for _, c := range conns {
			c.Close()
		}
	}
	if st := db.Stats(); st.MaxOpenConnections > 0 {
		n = min(n, 1+st.MaxOpenConnections-st.InUse) // the snapshot's own is in use: never wait for a busy pool
	}
	for range n - 1 {
		cctx, cancel := context.WithTimeout(ctx, connWait)
		conn, err := db.Conn(cctx)
		cancel()
		if err != nil {
			break
		}
		conns = append(conns, conn)
	}
	joined := make([]*sql.Tx, len(conns))
	var wg sync.WaitGroup
	for i, conn := range conns {
		wg.Go(func() {
			if tx, ok, err := canal.JoinSnapshot(ctx, conn, pos); err == nil && ok {
				joined[i] = tx // else a commit came in between, or no binlog_snapshot status
			}
		})
	}
	wg.Wait()
	for _, tx := range joined {
		if tx != nil {
			txs = append(txs, tx)
		}
	}
	return txs, end
}

// templateBounds is the lowest and highest template id of the template
// table: where the ranges of a split count are cut. Coupons of ids
// outside it fall in the open-ended first and last range. ok is false
// without one, when it is empty, or when it cannot be read (a source of
// several may hold no copy of it): the snapshot's transaction then counts
// alone (a failed statement leaves a MySQL transaction open).
func (s *Queries) templateBounds(ctx context.Context, tx *sql.Tx) (lo, hi int64, ok bool) {
	t := s.m.Template
	if t.Table == "" || t.ID == "" {
		return 0, 0, false
	}
	var l, h sql.NullInt64
	err := tx.QueryRowContext(ctx, fmt.Sprintf("SELECT MIN(%s), MAX(%s) FROM %s", quoteIdent(t.ID), quoteIdent(t.ID), s.table(t.Table))).Scan(&l, &h)
	return l.Int64, h.Int64, err == nil && l.Valid && h.Valid
}

// idRange is one range of template ids a reader counts: [from, to), with
// open ends where open says.
type idRange struct {
	from, to         int64
	openLow, openTop bool
}

// cond is the range as a condition on col, with its arguments.
func (r idRange) cond(col string) (string, []any) {
	switch {
	case r.openLow && r.openTop:
		return "", nil
	case r.openLow:
		return col + " < ?", []any{r.to}
	case r.openTop:
		return col + " >= ?", []any{r.from}
	}
	return col + " >= ? AND " + col + " < ?", []any{r.from, r.to}
}

// idRanges cuts the ids lo..hi into up to n ranges of equal width, the
// first open below and the last open above: together they hold every id.
func idRanges(lo, hi int64, n int) []idRange {
	span := uint64(hi) - uint64(lo) // hi − lo, whatever the signs
	width := span/uint64(n) + 1
	var out []idRange
	for off := uint64(0); ; off += width {
		from := int64(uint64(lo) + off)
		out = append(out, idRange{from: from, to: int64(uint64(from) + width)})
		if span-off < width {
			break // the last: it holds hi
		}
	}
	out[0].openLow = true
	out[len(out)-1].openTop = true
	return out
}

// countSplit counts the user coupons (not the releases) with txs, which
// read the same snapshot, each taking the next range of template ids
// until none is left.
func (s *Queries) countSplit(ctx context.Context, txs []*sql.Tx, lo, hi int64) (map[Pair]*Counts, error) {
	ranges := idRanges(lo, hi, len(txs)*rangesPerReader)
	var next atomic.Int64
	parts := make([]map[Pair]*Counts, len(txs))
	var failed error
	var once sync.Once
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i, tx := range txs {
		parts[i] = map[Pair]*Counts{}
		wg.Go(func() {
			for {
				k := int(next.Add(1)) - 1
				if k >= len(ranges) {
					return
				}
				cond, args := ranges[k].cond(quoteIdent(s.m.UserCoupon.Template))
				if err := s.countRange(ctx, tx, cond, args, parts[i]); err != nil {
					once.Do(func() { failed = err; cancel() }) // the first: the others then fail on ctx
					return
				}
			}
		})
	}
	wg.Wait()
	if failed != nil {
		return nil, failed
	}
	out := parts[0]
	for _, part := range parts[1:] {
		for p, c := range part {
			at(out, p).Add(*c)
		}
	}
	return out, nil
}
