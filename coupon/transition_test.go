package coupon_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
)

// The legal transitions of docs/design.md, written out independently of
// coupon.Rules: (from, action) -> (to, quota effect).
type legalMove struct {
	to     coupon.Status
	effect coupon.QuotaEffect
}

var designTable = map[coupon.Status]map[coupon.Action]legalMove{
	coupon.None: {
		coupon.ActionClaim: {coupon.Available, coupon.EffectReserve},
	},
	coupon.Available: {
		coupon.ActionRedeem: {coupon.Used, coupon.EffectConsume},
		coupon.ActionExpire: {coupon.Expired, coupon.EffectFreeze},
		coupon.ActionVoid:   {coupon.Returned, coupon.EffectRelease},
	},
	coupon.Used: {
		coupon.ActionRefundRestore: {coupon.Available, coupon.EffectKeep},
		coupon.ActionRefundRecycle: {coupon.Returned, coupon.EffectRelease},
	},
}

var allActions = []coupon.Action{coupon.ActionClaim, coupon.ActionRedeem, coupon.ActionRefundRestore,
	coupon.ActionExpire, coupon.ActionVoid, coupon.ActionRefundRecycle}

// targetOf is where an action always leads (from docs/design.md), legal or not.
var targetOf = map[coupon.Action]coupon.Status{
	coupon.ActionClaim: coupon.Available, coupon.ActionRedeem: coupon.Used, coupon.ActionRefundRestore: coupon.Available,
	coupon.ActionExpire: coupon.Expired, coupon.ActionVoid: coupon.Returned, coupon.ActionRefundRecycle: coupon.Returned,
}

// Every (from state, action) pair: the 4 stored states and "no row" x the 6
// actions. Legal pairs give the docs/design.md target and quota effect; every
// other pair is an *Error illegal_transition that names both states.
func TestCheckEveryStateAndAction(t *testing.T) {
	legal := 0
	for _, from := range append([]coupon.Status{coupon.None}, coupon.Statuses...) {
		for _, a := range allActions {
			t.Run(fmt.Sprintf("%s/%s", from, a), func(t *testing.T) {
				to, err := coupon.Check(a, from)
				want, ok := designTable[from][a]
				if ok {
					legal++
					require.NoError(t, err)
					assert.Equal(t, want.to, to)
					rule, found := coupon.RuleFor(a)
					require.True(t, found)
					assert.Equal(t, coupon.Rule{From: from, To: want.to, Action: a, Effect: want.effect}, rule)
					assert.True(t, coupon.Legal(from, to))
					return
				}
				require.Error(t, err)
				assert.Equal(t, coupon.None, to)
				var ce *coupon.Error
				require.True(t, errors.As(err, &ce), "want *coupon.Error, got %T", err)
				assert.Equal(t, api.CodeIllegalTransition, ce.Code)
				assert.Contains(t, ce.Message, fmt.Sprintf("%s -> %s", from, targetOf[a]))
				assert.Contains(t, ce.Message, string(a))
				assert.Contains(t, ce.Message, "nothing was written")
			})
		}
	}
	assert.Equal(t, 6, legal, "docs/design.md has six legal transitions")
}

// Legal(from, to) over all 25 pairs of states is exactly the six rules; a
// status that does not change is not a transition.
func TestLegalEveryPairOfStates(t *testing.T) {
	states := append([]coupon.Status{coupon.None}, coupon.Statuses...)
	for _, from := range states {
		for _, to := range states {
			want := false
			for _, m := range designTable[from] {
				if m.to == to {
					want = true
				}
			}
			assert.Equal(t, want, coupon.Legal(from, to), "%s -> %s", from, to)
		}
	}
	assert.Len(t, coupon.Rules, 6)
}

func TestCheckUnknownAction(t *testing.T) {
	_, err := coupon.Check("teleport", coupon.Available)
	e, ok := coupon.AsError(err)
	require.True(t, ok)
	assert.Equal(t, api.CodeInvalidArgument, e.Code)
	assert.Equal(t, "action", e.Field)
}

func TestStatusNames(t *testing.T) {
	for _, s := range append([]coupon.Status{coupon.None}, coupon.Statuses...) {
		got, err := coupon.ParseStatus(s.String())
		require.NoError(t, err)
		assert.Equal(t, s, got)
	}
	assert.Equal(t, []coupon.Status{1, 2, 3, 4}, coupon.Statuses, "stored codes of the reference schema")
	_, err := coupon.ParseStatus("LOST")
	assert.Error(t, err)
	assert.False(t, coupon.None.Valid())
	assert.False(t, coupon.Status(5).Valid())
	assert.True(t, coupon.Returned.Valid())
}
