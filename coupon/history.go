package coupon

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"time"

	"github.com/couponlink/couponlink/internal/sqltx"
)

// Event is one step of a coupon's life, told from the ledgers.
type Event struct {
	At           time.Time `json:"at"`
	Event        string    `json:"event"` // claimed, redeemed, refunded, expired, voided, released, corrected
	From         string    `json:"from"`
	To           string    `json:"to"`
	Channel      string    `json:"channel,omitempty"`
	OrderID      string    `json:"order_id,omitempty"`
	RedemptionID int64     `json:"redemption_id,omitempty"`
	Mode         string    `json:"mode,omitempty"`
	Reason       string    `json:"reason,omitempty"`
	Operator     string    `json:"operator,omitempty"`
	RequestID    string    `json:"request_id,omitempty"`
	rank         int       // tie-break for equal times: causal order (a refund right after its redemption)
}

// History is a coupon and its life, oldest first.
type History struct {
	UserCouponID int64     `json:"user_coupon_id"`
	TemplateID   int64     `json:"template_id"`
	UserID       string    `json:"user_id"`
	Channel      string    `json:"channel"`
	Status       string    `json:"status"`
	ExpiresAt    time.Time `json:"expires_at"`
	Events       []Event   `json:"events"`
}

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
	h.Events = append(h.Events, Event{At: c.ClaimedAt, Event: "claimed", From: None.String(), To: Available.String(),
		Channel: c.Channel, RequestID: c.RequestID.String})
	// Ranks order events that share a time: redemptions in id order, each
	// refund right after the redemption it undoes, every other movement
	// (expiry, void, release: from a state no redemption follows) after them.
	rank := 0
	redemptionRank := map[int64]int{}
	if err := sqltx.EachRow(ctx, tx, `SELECT id, order_id, redeemed_at FROM redemption_log WHERE user_coupon_id = ? ORDER BY id`,
		[]any{id}, func(r *sql.Rows) error {
			e := Event{Event: "redeemed", From: Available.String(), To: Used.String()}
			if err := r.Scan(&e.RedemptionID, &e.OrderID, &e.At); err != nil {
				return err
			}
			rank += 2
			e.rank = rank
			redemptionRank[e.RedemptionID] = rank
			h.Events = append(h.Events, e)
			return nil
		}); err != nil {
		return h, fmt.Errorf("read redemptions of coupon %d: %w", id, err)
	}
	if err := sqltx.EachRow(ctx, tx, `SELECT kind, seq, from_status, to_status, mode, order_id, reason, operator, request_id, created_at
		FROM inventory_flow WHERE user_coupon_id = ? ORDER BY id`, []any{id}, func(r *sql.Rows) error {
		var kind string
		var seq int64
		var from, to Status
		var mode, order, reason, operator, reqID sql.NullString
		e := Event{}
		if err := r.Scan(&kind, &seq, &from, &to, &mode, &order, &reason, &operator, &reqID, &e.At); err != nil {
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
		if r, ok := redemptionRank[seq]; ok && kind == FlowRefund {
			e.rank = r + 1
		} else {
			rank += 2
			e.rank = rank
		}
		h.Events = append(h.Events, e)
		return nil
	}); err != nil {
		return h, fmt.Errorf("read movements of coupon %d: %w", id, err)
	}
	sort.SliceStable(h.Events, func(i, j int) bool {
		if !h.Events[i].At.Equal(h.Events[j].At) {
			return h.Events[i].At.Before(h.Events[j].At)
		}
		return h.Events[i].rank < h.Events[j].rank
	})
	return h, nil
}
