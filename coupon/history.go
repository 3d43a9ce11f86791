package coupon

import (
	"context"
	"database/sql"
	"fmt"
	"sort"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// Event is one step of a coupon's life, told from the ledgers.
type Event = api.HistoryEvent

// History is a coupon and its life, oldest first.
type History = api.History

// rankedEvent is an event and its tie-break for equal times: causal order
// (a refund right after its redemption).
type rankedEvent struct {
	event
	rank int
}

// event is Event under a name that, embedded, does not hide Event.Event.
type event = Event

var flowEvent = map[string]string{
	FlowRefund: "refunded", FlowExpire: "expired", FlowVoid: "voided", FlowRelease: "released", FlowCorrection: "corrected",
}

// History tells a coupon's whole life from user_coupon (the claim),
// redemption_log (redemptions) and inventory_flow (every reverse movement).
func (s *Store) History(ctx context.Context, id int64) (History, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return History{}, fmt.Errorf("begin snapshot: %w", err)
	}
	defer tx.Rollback()
	c, err := loadCoupon(ctx, tx, id)
	if err != nil {
		return History{}, err
	}
	h := History{UserCouponID: c.ID, TemplateID: c.TemplateID, UserID: c.UserID, Channel: c.Channel,
		Status: c.Status.String(), ExpiresAt: c.ExpiresAt}
	events := []rankedEvent{{event: Event{At: c.ClaimedAt, Event: "claimed", From: None.String(), To: Available.String(),
		Channel: c.Channel, RequestID: c.RequestID.String}}}
	// Ranks order events that share a time: redemptions in id order, each
	// refund right after the redemption it undoes, every other movement
	// (expiry, void, release: from a state no redemption follows) after them.
	rank := 0
	redemptionRank := map[int64]int{}
	if err := sqltx.EachRow(ctx, tx, `SELECT id, order_id, redeemed_at FROM redemption_log WHERE user_coupon_id = ? ORDER BY id`,
		[]any{id}, func(r *sql.Rows) error {
			e := rankedEvent{event: Event{Event: "redeemed", From: Available.String(), To: Used.String()}}
			if err := r.Scan(&e.RedemptionID, &e.OrderID, &e.At); err != nil {
				return err
			}
			rank += 2
			e.rank = rank
			redemptionRank[e.RedemptionID] = rank
			events = append(events, e)
			return nil
		}); err != nil {
		return h, fmt.Errorf("read redemptions of coupon %d: %w", id, err)
	}
	if err := sqltx.EachRow(ctx, tx, `SELECT kind, seq, from_status, to_status, mode, order_id, reason, operator, on_behalf_of, request_id, created_at
		FROM inventory_flow WHERE user_coupon_id = ? ORDER BY id`, []any{id}, func(r *sql.Rows) error {
		var kind string
		var seq int64
		var from, to Status
		var mode, order, reason, operator, behalf, reqID sql.NullString
		e := rankedEvent{}
		if err := r.Scan(&kind, &seq, &from, &to, &mode, &order, &reason, &operator, &behalf, &reqID, &e.At); err != nil {
			return err
		}
		e.Event, e.From, e.To = flowEvent[kind], from.String(), to.String()
		if e.Event == "" {
			e.Event = kind
		}
		if kind == FlowRefund {
			e.RedemptionID = seq
		}
		e.Mode, e.OrderID, e.Reason, e.Operator, e.RequestID = mode.String, order.String, reason.String, operator.String, reqID.String
		e.OnBehalfOf = behalf.String
		if r, ok := redemptionRank[seq]; ok && kind == FlowRefund {
			e.rank = r + 1
		} else {
			rank += 2
			e.rank = rank
		}
		events = append(events, e)
		return nil
	}); err != nil {
		return h, fmt.Errorf("read movements of coupon %d: %w", id, err)
	}
	sort.SliceStable(events, func(i, j int) bool {
		if !events[i].At.Equal(events[j].At) {
			return events[i].At.Before(events[j].At)
		}
		return events[i].rank < events[j].rank
	})
	for _, e := range events {
		h.Events = append(h.Events, e.event)
	}
	return h, nil
}
