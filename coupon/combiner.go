package coupon

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"

	"github.com/couponlink/couponlink/internal/sqltx"
)

// The write combiner. One hot row serialises every write to it: its row
// lock is held until COMMIT returns, and every COMMIT waits for its log
// flush. Requests that arrive while a group transaction of their queue is
// in flight wait, and the next transaction takes up to CombineMax of them
// (docs/design.md, "The write combiner's contract"). Claims queue per template, over all
// its channel buckets (claimgroup.go), redemptions per lane of coupons
// (redeemgroup.go).
// Batching is natural, as in the cdc's batcher: a lone request goes at
// once, there is no timer, and no goroutine of the combiner's own: the
// callers run the groups. One caller at a time leads a queue; when its
// group is done it hands the lead to the first queued caller, so each
// caller returns as soon as its own group is answered. An idle queue leaves
// nothing behind (its map entry is removed), so there is nothing to shut
// down: the HTTP server's graceful stop drains the callers.

// member is what every combined call carries through the combiner.
type member struct {
	ctx  context.Context
	wake chan bool // true: lead the next group; false: answered
	// solo: answer this request on the single path after the group (the
	// group fell back after a database error, or the request could not
	// share the group, e.g. its key came twice).
	solo bool
}

func newMember(ctx context.Context) member { return member{ctx: ctx, wake: make(chan bool, 1)} }

// combinable is a call type of a combiner (a *claimCall, a *redeemCall).
type combinable interface {
	base() *member
	// groupKey: two calls of one key never share a group transaction (a
	// request_id, a coupon); the later one is answered by the single path
	// after the group, like a retry.
	groupKey() string
	single(s *Store) // answers the call on the single path
	reset()          // forgets the answer of a group that rolled back
}

// GroupObserver is told the size of every group a combiner ran.
type GroupObserver func(size int)

// groupStats counts a combiner's groups; it outlives a combiner that is off.
type groupStats struct {
	groups, fallbacks atomic.Int64
	observer          atomic.Pointer[GroupObserver]
}

func (g *groupStats) ran(size int) {
	g.groups.Add(1)
	if obs := g.observer.Load(); obs != nil && *obs != nil {
		(*obs)(size)
	}
}

// queue is one key's waiting calls; busy while a group runs.
type queue[C any] struct {
	busy  bool
	calls []C
}

// combiner queues calls C by key K and runs them in groups of up to max.
type combiner[K comparable, C combinable] struct {
	store  *Store // answers the solo calls
	max    int
	run    func(ctx context.Context, group []C) // answers the group's calls, or marks them solo
	stats  *groupStats
	mu     sync.Mutex
	queues map[K]*queue[C]
}

func newCombiner[K comparable, C combinable](s *Store, max int, stats *groupStats, run func(context.Context, []C)) *combiner[K, C] {
	return &combiner[K, C]{store: s, max: max, run: run, stats: stats, queues: map[K]*queue[C]{}}
}

// do takes call through k's queue and answers it: in a group this caller
// leads or one led by another caller, or, if the group left it solo, alone
// on the single path. ctx's error if call left the queue before a leader
// took it.
func (c *combiner[K, C]) do(k K, call C) error {
	if err := c.take(k, call); err != nil {
		return err
	}
	settle(c.store, call)
	return nil
}

// take takes call through k's queue: when it returns nil, call is answered
// (its out and err) or marked solo.
func (c *combiner[K, C]) take(k K, call C) error {
	m := call.base()
	c.mu.Lock()
	q := c.queues[k]
	if q == nil {
		q = &queue[C]{}
		c.queues[k] = q
	}
	if !q.busy {
		q.busy = true
		c.mu.Unlock()
		c.lead(k, q, call)
		return nil
	}
	q.calls = append(q.calls, call)
	c.mu.Unlock()
	select {
	case lead := <-m.wake:
		if lead {
			c.lead(k, q, call)
		}
	case <-m.ctx.Done():
		if c.dequeue(q, call) {
			return m.ctx.Err()
		}
		// a leader took it already: wait for its answer (or the lead)
		if <-m.wake {
			c.lead(k, q, call)
		}
	}
	return nil
}

// settle answers call alone on the single path if its group left it solo.
func settle[C combinable](s *Store, call C) {
	if call.base().solo {
		call.single(s)
	}
}

// dequeue removes a call that is still waiting; false if a leader took it.
func (c *combiner[K, C]) dequeue(q *queue[C], call C) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, w := range q.calls {
		if w.base() == call.base() {
			q.calls = append(q.calls[:i], q.calls[i+1:]...)
			return true
		}
	}
	return false
}

// lead runs one group headed by first, answers its members and hands the
// queue to the next waiting caller (or leaves it idle). Whatever happens to
// the group (even a panic), its members are woken and the queue handed on:
// nobody waits for a leader that is gone. The leader answers itself after
// the hand-on, so that a solo answer does not hold up the queue.
func (c *combiner[K, C]) lead(k K, q *queue[C], first C) {
	c.mu.Lock()
	n := min(len(q.calls), c.max-1)
	group := append([]C{first}, q.calls[:n]...)
	q.calls = append(q.calls[:0:0], q.calls[n:]...)
	c.mu.Unlock()
	ran := false
	defer func() {
		for i, call := range group {
			m := call.base()
			m.solo = m.solo || !ran
			if i > 0 {
				m.wake <- false
			}
		}
		c.handOn(k, q)
	}()
	// The group outlives a member's cancelled request: the others wait on it.
	c.run(context.WithoutCancel(first.base().ctx), group)
	ran = true
	c.stats.ran(len(group))
}

// handOn gives k's lead to its first waiting caller, or leaves the queue
// idle (and forgotten).
func (c *combiner[K, C]) handOn(k K, q *queue[C]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(q.calls) == 0 {
		q.busy = false
		delete(c.queues, k)
		return
	}
	next := q.calls[0]
	q.calls = q.calls[1:]
	next.base().wake <- true
}

// groupTxOptions: every group transaction runs at READ COMMITTED, its
// reads see what has committed, as the single path's autocommit reads do,
// and lock no gaps (claimgroup.go).
var groupTxOptions = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// fault is the tests' hook into a group transaction at a stage.
func (s *Store) fault(stage string, size int) error {
	if s.groupFault == nil {
		return nil
	}
	return s.groupFault(stage, size)
}

// answerGroup answers every call of a group, or marks them solo: the calls of
// distinct keys share one transaction that write decides and writes (a
// rule refusal is an answer, not an error); any error of that transaction
// rolls it back and every call of it is answered alone by the single path.
func answerGroup[C combinable](ctx context.Context, s *Store, what string, stats *groupStats, group []C,
	write func(ctx context.Context, tx *sql.Tx, group []C) error) {
	seen := make(map[string]bool, len(group))
	fresh := make([]C, 0, len(group))
	for _, c := range group {
		if k := c.groupKey(); seen[k] {
			c.base().solo = true
		} else {
			seen[k] = true
			fresh = append(fresh, c)
		}
	}
	if len(fresh) == 1 {
		// A lone request takes the single path, still in its queue's turn:
		// its round trips are fewer than a group's.
		fresh[0].single(s)
		return
	}
	err := sqltx.Run(ctx, s.db, groupTxOptions, func(tx *sql.Tx) error {
		if err := s.fault("begin", len(fresh)); err != nil {
			return err
		}
		return write(ctx, tx, fresh)
	})
	if err != nil {
		s.log.Info(what+" group fell back to single requests", "size", len(fresh), "err", err)
		stats.fallbacks.Add(1)
		for _, c := range fresh {
			c.reset()
			c.base().solo = true
		}
	}
}

// The claim combiner's call and its answer.

// claimCall is one caller's claim on its way through the combiner.
type claimCall struct {
	member
	req   ClaimRequest
	rules templateRules
	out   Claim
	err   error
}

func (c *claimCall) base() *member    { return &c.member }
func (c *claimCall) groupKey() string { return c.req.RequestID }
func (c *claimCall) single(s *Store)  { c.out, c.err = s.claimOne(c.ctx, c.req, c.rules) }
func (c *claimCall) reset()           { c.out, c.err = Claim{}, nil }

// ObserveClaimGroups sets the observer of claim group sizes (a metric).
func (s *Store) ObserveClaimGroups(fn GroupObserver) { s.claimStats.observer.Store(&fn) }

// claimCombined runs a validated claim through its template's combiner.
func (s *Store) claimCombined(ctx context.Context, req ClaimRequest, rules templateRules) (Claim, error) {
	call := &claimCall{member: newMember(ctx), req: req, rules: rules}
	if err := s.claims.do(req.TemplateID, call); err != nil {
		return Claim{}, err
	}
	return call.out, call.err
}

// ClaimGroups is how many claim groups the combiner ran (0 when it is off).
func (s *Store) ClaimGroups() int64 { return s.claimStats.groups.Load() }

// ClaimFallbacks is how many claim groups fell back to single claims.
func (s *Store) ClaimFallbacks() int64 { return s.claimStats.fallbacks.Load() }
