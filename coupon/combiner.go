package coupon

import (
	"context"
	"sync"
	"sync/atomic"
)

// The claim combiner. One hot channel_quota row serialises every claim of
// its bucket: its row lock is held until COMMIT returns. Claims of a bucket
// that arrive while a group transaction on it is in flight queue up, and the
// next transaction takes up to CombineMax of them (DESIGN.md, "The write
// combiner"). Batching is natural, as in the cdc's batcher: a lone claim
// goes at once, there is no timer, and no goroutine of the combiner's own:
// the callers run the groups. One caller at a time leads a bucket; when its
// group is done it hands the lead to the first queued caller, so each
// caller returns as soon as its own group is answered. An idle bucket leaves
// nothing behind (its map entry is removed), so there is nothing to shut
// down: the HTTP server's graceful stop drains the callers.

// bucketKey is one (template, channel) bucket.
type bucketKey struct {
	template int64
	channel  string
}

// claimCall is one caller's claim on its way through the combiner.
type claimCall struct {
	ctx   context.Context
	req   ClaimRequest
	rules templateRules
	wake  chan bool // true: lead the next group; false: answered
	out   Claim
	err   error
	// solo: run this request on the single path after the group (the group
	// fell back after a database error, or its request_id came twice).
	solo bool
}

// bucketQueue is a bucket's waiting claims; busy while a group runs.
type bucketQueue struct {
	busy  bool
	queue []*claimCall
}

type claimCombiner struct {
	max     int
	mu      sync.Mutex
	buckets map[bucketKey]*bucketQueue
}

func newClaimCombiner(max int) *claimCombiner {
	return &claimCombiner{max: max, buckets: map[bucketKey]*bucketQueue{}}
}

// ClaimGroupObserver is told the size of every claim group the combiner ran.
type ClaimGroupObserver func(size int)

// ObserveClaimGroups sets the observer of claim group sizes (a metric).
func (s *Store) ObserveClaimGroups(fn ClaimGroupObserver) { s.groupObserver.Store(&fn) }

// claimCombined runs a validated claim through its bucket's combiner.
func (s *Store) claimCombined(ctx context.Context, req ClaimRequest, rules templateRules) (Claim, error) {
	call := &claimCall{ctx: ctx, req: req, rules: rules, wake: make(chan bool, 1)}
	k := bucketKey{req.TemplateID, req.Channel}
	c := s.combiner
	c.mu.Lock()
	q := c.buckets[k]
	if q == nil {
		q = &bucketQueue{}
		c.buckets[k] = q
	}
	if !q.busy {
		q.busy = true
		c.mu.Unlock()
		return s.leadClaims(k, q, call)
	}
	q.queue = append(q.queue, call)
	c.mu.Unlock()
	select {
	case lead := <-call.wake:
		if lead {
			return s.leadClaims(k, q, call)
		}
	case <-ctx.Done():
		if c.dequeue(q, call) {
			return Claim{}, ctx.Err()
		}
		// a leader took it already: wait for its answer (or the lead)
		if <-call.wake {
			return s.leadClaims(k, q, call)
		}
	}
	return s.answer(call)
}

// dequeue removes a call that is still waiting; false if a leader took it.
func (c *claimCombiner) dequeue(q *bucketQueue, call *claimCall) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, w := range q.queue {
		if w == call {
			q.queue = append(q.queue[:i], q.queue[i+1:]...)
			return true
		}
	}
	return false
}

// leadClaims runs one group headed by first, answers its members and hands
// the bucket to the next waiting caller (or leaves it idle).
func (s *Store) leadClaims(k bucketKey, q *bucketQueue, first *claimCall) (Claim, error) {
	c := s.combiner
	c.mu.Lock()
	n := min(len(q.queue), c.max-1)
	group := append([]*claimCall{first}, q.queue[:n]...)
	q.queue = append(q.queue[:0:0], q.queue[n:]...)
	c.mu.Unlock()
	s.runGroupAndHandOn(k, q, group)
	// after the hand-on: a solo answer must not hold up the bucket
	return s.answer(first)
}

// runGroupAndHandOn runs the group, wakes its members and hands the bucket
// on. Whatever happens to the group (even a panic), they are woken and the
// bucket handed on: nobody waits for a leader that is gone.
func (s *Store) runGroupAndHandOn(k bucketKey, q *bucketQueue, group []*claimCall) {
	first, c := group[0], s.combiner
	ran := false
	defer func() {
		for i, m := range group {
			m.solo = m.solo || !ran
			if i == 0 {
				continue // the leader answers itself
			}
			m.wake <- false
		}
		c.handOn(k, q)
	}()
	// The group outlives a member's cancelled request: the others wait on it.
	s.runClaimGroup(context.WithoutCancel(first.ctx), group)
	ran = true
	s.claimGroups.Add(1)
	if obs := s.groupObserver.Load(); obs != nil && *obs != nil {
		(*obs)(len(group))
	}
}

// handOn gives the bucket's lead to its first waiting caller, or leaves
// the bucket idle (and forgotten).
func (c *claimCombiner) handOn(k bucketKey, q *bucketQueue) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(q.queue) == 0 {
		q.busy = false
		delete(c.buckets, k)
		return
	}
	next := q.queue[0]
	q.queue = q.queue[1:]
	next.wake <- true
}

// answer is a call's own answer, from the group or from the single path.
func (s *Store) answer(call *claimCall) (Claim, error) {
	if call.solo {
		return s.claimOne(call.ctx, call.req, call.rules)
	}
	return call.out, call.err
}

// ClaimGroups is how many claim groups the combiner ran (0 when it is off).
func (s *Store) ClaimGroups() int64 { return s.claimGroups.Load() }

// ClaimFallbacks is how many claim groups fell back to single claims.
func (s *Store) ClaimFallbacks() int64 { return s.claimFallbacks.Load() }

// groupObserverPtr keeps the observer swappable without a lock.
type groupObserverPtr = atomic.Pointer[ClaimGroupObserver]
