package inventory

import (
	"container/heap"
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
)

// ServerCoupons is one source's coupon tables for DuplicateIDsAcross: the
// source's name, its server, and the queries of its mapping (resolved on
// that server).
type ServerCoupons struct {
	Name   string
	DB     *sql.DB
	Source *Source
}

// DuplicateAcross is a coupon id held by the coupon tables of more than
// one source.
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
	txs := make([]*sql.Tx, len(servers))
	var out []DuplicateAcross
	var open func(i int) error
	open = func(i int) error {
		if i == len(servers) {
			var err error
			out, err = mergeIDs(ctx, servers, txs, limit)
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
func mergeIDs(ctx context.Context, servers []ServerCoupons, txs []*sql.Tx, limit int) ([]DuplicateAcross, error) {
	var h cursorHeap
	for i, s := range servers {
		uc := s.Source.m.UserCoupon
		tables, err := s.Source.m.TablesOf(uc.Table)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", s.Name, err)
		}
		for _, t := range tables {
			c := &serverCursor{idCursor: &idCursor{table: quoteTable(t), name: s.Name + ":" + t.String(), after: math.MinInt64,
				chunk: s.Source.idChunk}, tx: txs[i], server: s.Name, id: quoteIdent(uc.ID)}
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
