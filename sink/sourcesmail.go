package sink

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/inventory"
)

// A (coupon, order) written off on two servers: each source's cdc counts
// the write-offs of its own server (duplicates.go), so a duplicate split
// over servers is seen by asking the others. Each source's cdc (the
// judge's too) asks the other sources, for the write-off rows of each
// batch, whether they hold a row of the same (coupon, order), and mails
// the judge those they do (cdc_sources_mail, on its own server, in the
// batch's transaction); while a source cannot be asked it mails every
// (coupon, order) of its batches, for the judge to decide. Of two rows
// written at once on two servers, at least one cdc sees the other's row
// (each asks after its own row committed), and both may: the judge
// decides each (coupon, order) once, on the rows all the sources hold
// when it reads the mail (sourcesjudge.go).

// peersDownFor is how long the mail goes without asking after a source
// could not be asked (each look-up waits up to peerTimeout).
const peersDownFor = 10 * time.Second

// crossWriteOffs is a source's part: the mail.
type crossWriteOffs struct {
	noCheck
	s         *Sink
	mail      []redemptionKey // the batch's, written in its transaction
	downUntil time.Time       // a source could not be asked: mail all until then
}

func (c *crossWriteOffs) on() bool {
	return c.s.mails()
}

func (c *crossWriteOffs) judge(ctx context.Context, b *batch) ([]Anomaly, error) {
	c.mail = nil
	seen := map[redemptionKey]bool{}
	var keys []redemptionKey
	for _, r := range b.Redemptions {
		if k := (redemptionKey{r.Coupon, r.Order}); !r.Deleted && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	if time.Now().Before(c.downUntil) {
		c.mail = keys
		return nil, nil
	}
	found := map[int64][]string{}
	complete := c.s.onPeers(ctx, "write-off rows", func(ctx context.Context, src *inventory.Queries, db *sql.DB) error {
		more, err := src.Redeemed(ctx, db, couponsOf(keys))
		for cp, orders := range more {
			found[cp] = append(found[cp], orders...)
		}
		return err
	})
	if !complete {
		c.downUntil, c.mail = time.Now().Add(peersDownFor), keys
		return nil, nil
	}
	for _, k := range keys {
		if slices.Contains(found[k.coupon], k.order) {
			c.mail = append(c.mail, k)
		}
	}
	return nil, nil
}

func (c *crossWriteOffs) write(ctx context.Context, b *batch) ([]Anomaly, error) {
	ins := &rowInserter{tx: b.tx, what: "mail the judge", cols: 3, head: "INSERT INTO cdc_sources_mail (name, user_coupon_id, order_id) VALUES "}
	for _, k := range c.mail {
		if err := ins.add(ctx, c.s.cfg.Name, k.coupon, k.order); err != nil {
			return nil, err
		}
	}
	return nil, ins.flush(ctx)
}

// couponsOf is the keys' coupons, each once.
func couponsOf(keys []redemptionKey) []int64 {
	out := make([]int64, 0, len(keys))
	for _, k := range keys {
		if !slices.Contains(out, k.coupon) {
			out = append(out, k.coupon)
		}
	}
	return out
}

// mailbox is one source's mail as the judge reads it.
type mailbox struct {
	name string
	db   *sql.DB
}

// writtenOffTwice reads every source's new mail and decides it: each
// (coupon, order) held by n sources is n−1 duplicate_redemption anomalies,
// less those reported before. A source that cannot be asked leaves the
// whole pass undecided (its rows could be the ones that count).
func (c *sourcesJudge) writtenOffTwice(ctx context.Context) ([]Anomaly, error) {
	s := c.s
	boxes := []mailbox{{s.cfg.Name, s.db}}
	for _, p := range s.peers {
		boxes = append(boxes, mailbox{p.Name, p.DB})
	}
	var keys []redemptionKey
	read := map[string]int64{}
	for _, mb := range boxes {
		mctx, cancel := context.WithTimeout(ctx, peerTimeout)
		err := sqltx.EachRow(mctx, mb.db, `SELECT seq, user_coupon_id, order_id FROM cdc_sources_mail WHERE name = ? AND seq > ? ORDER BY seq LIMIT ?`,
			[]any{mb.name, c.read[mb.name], mailChunk}, func(rows *sql.Rows) error {
				var seq int64
				var k redemptionKey
				if err := rows.Scan(&seq, &k.coupon, &k.order); err != nil {
					return err
				}
				read[mb.name] = seq
				if !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
				return nil
			})
		cancel()
		if err != nil {
			s.m.peerErrors.WithLabelValues(mb.name).Inc()
			s.log.Warn("a source's mail could not be read; its write-offs wait for it", "peer", mb.name, "err", err)
			c.down = true
			return nil, nil
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	holders, complete, err := c.holders(ctx, keys)
	if err != nil || !complete {
		c.down = c.down || !complete
		return nil, err
	}
	reported, err := c.reported(ctx, keys)
	if err != nil {
		return nil, err
	}
	var out []Anomaly
	for _, k := range keys {
		srcs := holders[k]
		beyond := int64(len(srcs)) - 1
		for i := reported[k]; i < beyond; i++ {
			out = append(out, Anomaly{Kind: inventory.AnomalyDuplicateRedemption, Coupon: k.coupon, Order: k.order,
				Detail: fmt.Sprintf("coupon %d is written off for order %q on %d sources (%s): a duplicate redemption split over servers",
					k.coupon, k.order, len(srcs), strings.Join(srcs, ", "))})
		}
		if beyond > reported[k] {
			c.pend.reported[k] = beyond
		}
	}
	maps.Copy(c.pend.read, read)
	return out, s.placeCoupons(ctx, s.db, nil, out)
}

// holders asks every source (this one first) which of the keys it holds
// a write-off row of; complete is false when a source could not be asked.
func (c *sourcesJudge) holders(ctx context.Context, keys []redemptionKey) (map[redemptionKey][]string, bool, error) {
	s := c.s
	out := map[redemptionKey][]string{}
	add := func(name string, found map[int64][]string) {
		for _, k := range keys {
			if slices.Contains(found[k.coupon], k.order) {
				out[k] = append(out[k], name)
			}
		}
	}
	coupons := couponsOf(keys)
	own, err := s.src.Redeemed(ctx, s.db, coupons)
	if err != nil {
		return nil, false, err
	}
	add(s.cfg.Name, own)
	complete := s.onEachPeer(ctx, "write-off rows", func(ctx context.Context, p *peer) error {
		src, err := p.source(ctx)
		if err != nil {
			return err
		}
		found, err := src.Redeemed(ctx, p.DB, coupons)
		if err == nil {
			add(p.Name, found)
		}
		return err
	})
	return out, complete, nil
}

// reported reads how many sources beyond the first the judge has reported
// of each key.
func (c *sourcesJudge) reported(ctx context.Context, keys []redemptionKey) (map[redemptionKey]int64, error) {
	where, args := keysWhere([2]string{"id", "item"}, keys)
	out, err := sqltx.Map(ctx, c.s.db, `SELECT id, item, value FROM cdc_sources_state WHERE name = ? AND kind = 'write_off' AND `+where,
		append([]any{c.s.cfg.Name}, args...), func(rows *sql.Rows) (k redemptionKey, n int64, err error) {
			err = rows.Scan(&k.coupon, &k.order, &n)
			return k, n, err
		})
	if err != nil {
		return nil, fmt.Errorf("read the write-offs reported: %w", err)
	}
	return out, nil
}
