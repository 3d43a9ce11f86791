package inventory_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory"
)

func TestFromBatch(t *testing.T) {
	b := &canal.Batch{
		Transitions: []canal.Transition{
			{Coupon: 1, Template: 1, Channel: "app", To: coupon.Available},
			{Coupon: 2, Template: 1, Channel: "app", PrevTemplate: 1, PrevChannel: "app", From: coupon.Available, To: coupon.Used},
			{Coupon: 3, Template: 2, Channel: "sms", PrevTemplate: 1, PrevChannel: "app", From: coupon.Available, To: coupon.Expired},
			{Coupon: 4, PrevTemplate: 2, PrevChannel: "sms", From: coupon.Returned},
		},
		Flows: []canal.Flow{
			{Coupon: 3, Kind: coupon.FlowRelease, Template: 2, Channel: "sms"},
			{Coupon: 5, Kind: coupon.FlowVoid, Template: 2, Channel: "sms"},
		},
	}
	d := inventory.FromBatch(b)
	assert.Equal(t, inventory.Deltas{
		{Template: 1, Channel: "app"}: {Held: -1, Used: 1},
		{Template: 2, Channel: "sms"}: {Expired: 1, Returned: -1, Released: 1},
	}, d)
}
