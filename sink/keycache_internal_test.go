package sink

import (
	"context"
	"maps"
	"testing"
)

// The per-user counts a batch's transaction changed are put back before a
// retry of it, and forgotten at a start.
func TestKnownClaimsRewind(t *testing.T) {
	c := newUserLimits(nil)
	a, b := claimKey{1, "a"}, claimKey{1, "b"}
	c.known.m = map[claimKey]int64{a: 2}
	back := c.mark()
	back() // the first run: nothing to put back
	c.known.set(a, 3)
	c.known.set(b, 1)
	c.known.set(a, 4)
	back() // the retry
	if want := map[claimKey]int64{a: 2}; !maps.Equal(c.known.m, want) {
		t.Fatalf("after the retry's rewind: %v, want %v", c.known.m, want)
	}
	c.known.set(b, 1)
	c.mark() // the next batch: what the last one wrote stays
	if want := map[claimKey]int64{a: 2, b: 1}; !maps.Equal(c.known.m, want) {
		t.Fatalf("after the next batch's mark: %v, want %v", c.known.m, want)
	}
	if err := c.resume(context.Background(), true); err != nil || len(c.known.m) != 0 {
		t.Fatalf("after a start: %v (%v), want none", c.known.m, err)
	}
}

// The order keys a batch's transaction balanced or unbalanced are put back
// before a retry of it.
func TestBalancedOrderKeysRewind(t *testing.T) {
	c := &orderKeys{}
	a, b := orderKey{1, "a"}, orderKey{1, "b"}
	c.balanced.m = map[orderKey]bool{a: true}
	back := c.mark()
	c.setBalanced(a, false) // written: it has a row now
	c.setBalanced(b, true)  // read, and found none
	c.setBalanced(b, true)
	back() // the retry
	if want := map[orderKey]bool{a: true}; !maps.Equal(c.balanced.m, want) {
		t.Fatalf("after the retry's rewind: %v, want %v", c.balanced.m, want)
	}
	c.setBalanced(b, true)
	c.mark() // the next batch: what the last one found stays
	if want := map[orderKey]bool{a: true, b: true}; !maps.Equal(c.balanced.m, want) {
		t.Fatalf("after the next batch's mark: %v, want %v", c.balanced.m, want)
	}
}
