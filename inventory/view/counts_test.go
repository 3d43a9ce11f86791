package view_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory/view"
)

func TestCountsTerms(t *testing.T) {
	c := view.Counts{Quota: 10, Claimed: 8, Held: 3, Used: 2, Expired: 2, Returned: 2, Released: 1}
	assert.Equal(t, [4]int64{2, 9, 3, 8}, [4]int64{c.Claimable(), c.Issued(), c.Frozen(), c.Taken()})
	assert.True(t, c.Conserved())
	var sum view.Counts
	sum.Add(c)
	sum.Add(c)
	assert.Equal(t, view.Counts{Quota: 20, Claimed: 16, Held: 6, Used: 4, Expired: 4, Returned: 4, Released: 2}, sum)
	assert.False(t, sum.Bump(coupon.None, 1), "not a stored state")
	assert.True(t, sum.Bump(coupon.Used, 1))
	assert.Equal(t, int64(5), sum.Used)
}

// Conservation: quota = claimable + held + used + frozen, every term >= 0.
func TestCountsConserved(t *testing.T) {
	assert.True(t, view.Counts{Quota: 10, Claimed: 6, Held: 3, Used: 2, Expired: 1}.Conserved())
	assert.True(t, view.Counts{}.Conserved())
	assert.False(t, view.Counts{Quota: 10, Claimed: 6, Held: 3, Used: 2}.Conserved(), "a slot is missing")
	assert.False(t, view.Counts{Quota: 10, Claimed: -2, Held: -2}.Conserved(), "a negative term")
}
