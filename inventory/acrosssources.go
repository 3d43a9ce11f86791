package inventory

import (
	"container/heap"
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"

	"github.com/couponlink/couponlink/canal"
)

// ServerCoupons is one source's coupon tables for DuplicateIDsAcross: the
// source's name, its server, and the queries of its mapping (resolved on
// that server).
type ServerCoupons struct {
	Name    string
	DB      *sql.DB
	Queries *Queries
}

// DuplicateAcross is a coupon id held by the tables of more than one
// source: their coupon tables (DuplicateIDsAcross) or their write-off
// tables (WrittenOffAcross).
type DuplicateAcross struct {
	DuplicateID          // Tables as "source:schema.table"
	Sources     []string // the sources that hold it, in the order given
}

// DuplicateIDsAcross looks for coupon ids held by more than one source
// (DuplicateCouponIDs finds those repeated on one server) and returns up
// to limit of them, lowest first. Each server is read in one consistent
// snapshot of its own, each of its coupon tables in primary-key order, a
// chunk at a time, and all the tables merged by the next id: memory stays
// a chunk per table.
func DuplicateIDsAcross(ctx context.Context, servers []ServerCoupons, limit int) ([]DuplicateAcross, error) {
	return acrossServers(ctx, servers, limit, func(m *canal.Mapping) (string, string) { return m.UserCoupon.Table, m.UserCoupon.ID })
}

// WrittenOffAcross looks for coupons with redemption rows on more than one
// source (evidence table): the candidates of a (coupon, order) written off
// on two servers, which no one cdc sees. Each server's write-off tables
// are walked by their coupon column's index, distinct values a chunk at a
// time, as DuplicateIDsAcross walks the coupon ids; up to limit, lowest
// first.
func WrittenOffAcross(ctx context.Context, servers []ServerCoupons, limit int) ([]DuplicateAcross, error) {
	for _, s := range servers {
		if err := s.Queries.redemptionTable(); err != nil {
			return nil, err
		}
	}
	return acrossServers(ctx, servers, limit, func(m *canal.Mapping) (string, string) { return m.RedemptionLog.Table, m.RedemptionLog.Coupon })
}

// acrossServers reads, in one consistent snapshot per server, the distinct
// values of a mapped column (pick: its table and column) in every table of
// its set, and keeps the values held by more than one server.
func acrossServers(ctx context.Context, servers []ServerCoupons, limit int, pick func(*canal.Mapping) (table, column string)) ([]DuplicateAcross, error) {
	txs := make([]*sql.Tx, len(servers))
	var out []DuplicateAcross
	var open func(i int) error
	open = func(i int) error {
		if i == len(servers) {
			var err error
			out, err = mergeIDs(ctx, servers, txs, limit, pick)
			return err
		}
		return consistentSnapshot(ctx, servers[i].DB, func(tx *sql.Tx) error {
			txs[i] = tx
			return open(i + 1)
		})
	}
	return out, open(0)
}

// mergeIDs merges the ids of every coupon table of the servers (each read
// in its server's transaction) and keeps those on more than one server.
func mergeIDs(ctx context.Context, servers []ServerCoupons, txs []*sql.Tx, limit int, pick func(*canal.Mapping) (string, string)) ([]DuplicateAcross, error) {
	var h cursorHeap
	for i, s := range servers {
		table, column := pick(s.Queries.m)
		tables, err := s.Queries.m.TablesOf(table)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", s.Name, err)
		}
		for _, t := range tables {
			c := &serverCursor{idCursor: &idCursor{table: quoteTable(t), name: s.Name + ":" + t.String(), after: math.MinInt64,
				chunk: s.Queries.idChunk}, tx: txs[i], server: s.Name, id: quoteIdent(column)}
			if ok, err := c.next(ctx); err != nil {
				return nil, err
			} else if ok {
				h = append(h, c)
			}
		}
	}
	heap.Init(&h)
	var out []DuplicateAcross
	for h.Len() > 0 && len(out) < limit {
		d := DuplicateAcross{DuplicateID: DuplicateID{ID: h[0].ids[0]}}
		held := map[string]bool{}
		for h.Len() > 0 && h[0].ids[0] == d.ID {
			c := h[0]
			d.Tables = append(d.Tables, c.name)
			held[c.server] = true
			c.ids = c.ids[1:]
			ok, err := c.next(ctx)
			if err != nil {
				return nil, err
			}
			if ok {
				heap.Fix(&h, 0)
			} else {
				heap.Pop(&h)
			}
		}
		if len(held) > 1 {
			slices.Sort(d.Tables)
			for _, sv := range servers {
				if held[sv.Name] {
					d.Sources = append(d.Sources, sv.Name)
				}
			}
			out = append(out, d)
		}
	}
	return out, nil
}

// serverCursor reads one coupon table of one server in its transaction.
type serverCursor struct {
	*idCursor
	tx     *sql.Tx
	server string
	id     string // the id column, quoted
}

// next makes sure the cursor has an id to look at; false when its table
// is read through.
func (c *serverCursor) next(ctx context.Context) (bool, error) {
	if err := c.fill(ctx, c.tx, c.id); err != nil {
		return false, fmt.Errorf("read the ids of %s: %w", c.name, err)
	}
	return len(c.ids) > 0, nil
}

// cursorHeap orders the cursors by their next id.
type cursorHeap []*serverCursor

func (h cursorHeap) Len() int           { return len(h) }
func (h cursorHeap) Less(i, j int) bool { return h[i].ids[0] < h[j].ids[0] }
func (h cursorHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)        { *h = append(*h, x.(*serverCursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}
