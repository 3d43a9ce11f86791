package sink

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
)

// Peer is another source of a mapping that spans several servers
// (canal.SourceSpec). A sharding middleware may write a redemption row on
// another server than its coupon's, so the redemption-evidence checks also
// look on the peers before they call a use unproven, and an anomaly's
// coupon is placed from a peer's row when this server has none. A peer
// is only read; its own cdc counts its coupons.
type Peer struct {
	Name    string
	DB      *sql.DB
	Mapping *canal.Mapping // the peer's own mapping (canal.Mapping.ForSource)
}

// peerTimeout bounds one look-up on a peer: a peer that is down delays a
// batch by at most this long.
const peerTimeout = 5 * time.Second

// peer is a Peer with its mapping resolved on its server at first use.
type peer struct {
	Peer
	mu  sync.Mutex
	src *inventory.Queries
}

func newPeers(ps []Peer) []*peer {
	out := make([]*peer, len(ps))
	for i, p := range ps {
		out[i] = &peer{Peer: p}
	}
	return out
}

// source is the peer's queries, its mapping resolved on its server once
// (shard tables created later are seen after a restart, as on this one).
func (p *peer) source(ctx context.Context) (*inventory.Queries, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.src == nil {
		m, err := p.Mapping.Resolve(ctx, p.DB)
		if err != nil {
			return nil, err
		}
		p.src = inventory.NewQueries(m)
	}
	return p.src, nil
}

// onPeers runs ask on every peer, each bounded by peerTimeout. A peer
// that fails is logged and counted, and makes complete false: what it
// holds is unknown, not absent.
func (s *Sink) onPeers(ctx context.Context, what string, ask func(ctx context.Context, src *inventory.Queries, db *sql.DB) error) (complete bool) {
	return s.onEachPeer(ctx, what, func(ctx context.Context, p *peer) error {
		src, err := p.source(ctx)
		if err == nil {
			err = ask(ctx, src, p.DB)
		}
		return err
	})
}

// onEachPeer is onPeers with the peer itself.
func (s *Sink) onEachPeer(ctx context.Context, what string, ask func(ctx context.Context, p *peer) error) (complete bool) {
	complete = true
	for _, p := range s.peers {
		pctx, cancel := context.WithTimeout(ctx, peerTimeout)
		err := ask(pctx, p)
		cancel()
		if err != nil {
			complete = false
			s.m.peerErrors.WithLabelValues(p.Name).Inc()
			s.log.Warn("a peer source could not be asked; the checks that need it wait for it", "peer", p.Name, "lookup", what, "err", err)
		}
	}
	return complete
}

// redeemed returns the orders of the coupons' redemption rows on this
// server and on every peer; complete is false when a peer could not be
// asked.
func (s *Sink) redeemed(ctx context.Context, coupons []int64) (found map[int64][]string, complete bool, err error) {
	if found, err = s.src.Redeemed(ctx, s.db, coupons); err != nil {
		return nil, false, err
	}
	complete = s.onPeers(ctx, "redemption rows", func(ctx context.Context, src *inventory.Queries, db *sql.DB) error {
		more, err := src.Redeemed(ctx, db, coupons)
		for c, orders := range more {
			found[c] = append(found[c], orders...)
		}
		return err
	})
	return found, complete, nil
}

// pairsOf returns the (template, channel) of the coupons that have a row
// here (q) or, for the others, on a peer.
func (s *Sink) pairsOf(ctx context.Context, q inventory.Querier, coupons []int64) (map[int64]inventory.Pair, error) {
	found, err := s.src.PairsOf(ctx, q, coupons)
	if err != nil || len(s.peers) == 0 {
		return found, err
	}
	var missing []int64
	for _, c := range coupons {
		if _, ok := found[c]; !ok {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		s.onPeers(ctx, "coupon rows", func(ctx context.Context, src *inventory.Queries, db *sql.DB) error {
			more, err := src.PairsOf(ctx, db, missing)
			for c, p := range more {
				found[c] = p
			}
			return err
		})
	}
	return found, nil
}
