package canal

import (
	"database/sql"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/coupon"
)

// Transition is one change of a user coupon's status or of its
// (template, channel) keys or user, decoded from a user_coupon row change.
//
// An INSERT has From = None, a DELETE has To = None. An UPDATE is emitted
// when the status or the (template, channel) pair changed; when the
// mapping's evidence looks at them (coupon_order, order_table), when a
// coupon USED in both images changed its order or user column (From = To =
// USED: no counter moves, the sink judges it); and when per-user limits are
// judged, when the user column changed (From = To). PrevTemplate,
// PrevChannel, PrevOrder and PrevUser carry the before image's values
// (equal to the after image's for an INSERT or a DELETE, or when they did
// not change). Illegal transitions are decoded as they are: judging them
// is the sink's job.
type Transition struct {
	Coupon   int64
	Template int64
	Channel  string
	From, To coupon.Status
	// FromCode and ToCode are the status codes as the source stored them
	// in the before and after images, which From and To name in
	// couponlink's states (a legacy shop's 0 is AVAILABLE, couponlink's 1).
	// Invalid for NULL and where there is no image (the From of an INSERT,
	// the To of a DELETE); an unmapped code is kept beside a None state.
	FromCode, ToCode sql.NullInt64
	PrevTemplate     int64
	PrevChannel      string
	// Undecodable marks an UPDATE whose other image the mapping cannot
	// decode (see Undecodable): the coupon enters or leaves the counted set
	// without being inserted or deleted.
	Undecodable bool
	// Order is the after image's order column, or the before image's when
	// the after image has none and is not USED (a refund that clears it);
	// "" for NULL or when the mapping names no order column. A move into
	// USED always carries the after image's: its own evidence.
	Order     string
	PrevOrder string
	// User is the user column of the after image (the before image's for a
	// DELETE); "" for NULL or when the mapping names no user column.
	User     string
	PrevUser string
	// At is the binlog event's timestamp (second precision).
	At time.Time
	// Expires is the coupon's own expiry (user_coupon.expires_at) in the
	// after image (the before image's for a DELETE), as an instant in UTC;
	// zero: none (NULL, a zero date or unmapped).
	Expires time.Time
}

// Change is the transition's states with the codes the source stored,
// as anomalies show it: "AVAILABLE(0) -> USED(1)".
func (t *Transition) Change() string {
	return StateText(stateName(t.From), t.FromCode) + " -> " + StateText(stateName(t.To), t.ToCode)
}

// StateText shows a state (its name, "" for none) with the code the
// source stored for it: "USED(1)"; the name alone when the code is not
// known, "none" for neither, "unmapped(7)" for a code without a state.
func StateText(state string, code sql.NullInt64) string {
	switch {
	case state == "" && !code.Valid:
		return "none"
	case state == "":
		state = "unmapped"
	case !code.Valid:
		return state
	}
	return fmt.Sprintf("%s(%d)", state, code.Int64)
}

func stateName(s coupon.Status) string {
	if s == coupon.None {
		return ""
	}
	return s.String()
}

// Redemption is one redemption_log row inserted (or deleted, Deleted=true).
// Updates of redemption rows are ignored.
type Redemption struct {
	ID       int64
	Coupon   int64
	Template int64  // 0 when the mapping names no template column
	Channel  string // the mapping's default_channel when it names no channel column
	Order    string
	At       time.Time // binlog event timestamp
	Deleted  bool
	// After is how many of the batch's Transitions precede the row in the
	// binlog: with evidence states a row may be closed between two uses
	// of its coupon in one batch, so its uses are judged in binlog order.
	After int
}

// OrderRow is one row of a shop's order table (evidence order_table)
// inserted, or deleted (Deleted=true): an order that used a coupon of
// Template, by User. An order whose template column is NULL or 0 used no
// coupon and is not emitted; an UPDATE that changes the template or the
// user is the before image deleted and the after image inserted, other
// updates are not emitted.
type OrderRow struct {
	ID       string // the primary key, for messages
	Template int64
	User     string    // "" for NULL
	Order    string    // the mapping's order column (e.g. the order number); "" when unmapped or NULL
	At       time.Time // binlog event timestamp
	Deleted  bool
	// After is how many of the batch's Transitions precede the row in the
	// binlog: it places the orders among the uses, whose counts are
	// compared as they go.
	After int
}

// Flow is one inserted inventory_flow row: a reverse or corrective movement.
type Flow struct {
	ID, Coupon int64
	Kind       string
	Seq        int64
	Template   int64
	Channel    string
	From, To   coupon.Status
}

// QuotaChange is the after image of one channel_quota row (the before image
// with Deleted=true for a DELETE, or for the old key of an UPDATE that moved
// the row to another (template, channel)). Updates that change neither quota
// nor claimed are not emitted.
type QuotaChange struct {
	Template int64
	Channel  string
	Quota    int64
	Claimed  int64
	Inserted bool // a new row (a new bucket)
	Deleted  bool
	// SoldOut marks the change that took the bucket's last claimable slot:
	// claimed < quota before it, claimed >= quota after (quota > 0).
	SoldOut bool
	// Updated: an UPDATE of the same bucket; PrevQuota and PrevClaimed
	// are its before image (the channel.low signal compares them).
	Updated                bool
	PrevQuota, PrevClaimed int64
}

// TemplateChange is a template row as of one binlog row change: its
// budget and, where the mapping names them, its per-user limit and end
// time. It is the after image of an INSERT or of an UPDATE that changed
// one of those (or the id), the before image with Deleted=true for a
// DELETE (or for the old id of an UPDATE that changed it). Known is false
// for a NULL budget (the template has none); the Prev fields are what the
// before image held (zero for an INSERT). Only a legacy mapping that
// follows budgets, per-user limits or end times subscribes the template
// table (see Mapping.FollowsTemplates).
type TemplateChange struct {
	Template         int64
	Quota            int64
	Known            bool
	PrevQuota        int64
	PrevKnown        bool
	Limit, PrevLimit int64     // per-user limit; 0: none (NULL, 0, negative or unmapped)
	End, PrevEnd     time.Time // end time (UTC); zero: none (NULL, a zero date or unmapped)
	Start, PrevStart time.Time // start time (template.start_time), as End
	// Unlimited: the budget is one of template.unlimited (Known is then
	// false: nothing to judge over-issue against). OffShelf: the campaign
	// is off the shelf (template.status or template.deleted, shelf.go).
	Unlimited, PrevUnlimited bool
	OffShelf, PrevOffShelf   bool
	// Window: the campaign's coupons follow its current window
	// (template.fixed_window, window.go), not their own expiry.
	Window, PrevWindow bool
	Inserted, Deleted  bool
	// After is how many of the batch's Transitions precede the change in
	// the binlog: it is in force from Transitions[After] on.
	After int
}

// Undecodable is a source row change the mapping cannot decode: a NULL or
// unmapped status code, or a NULL id a record needs. It is counted nowhere:
// an UPDATE from a decodable image to an undecodable one is decoded as the
// coupon leaving the counted set (a Transition to None with Undecodable
// set), the reverse as it entering, like the snapshot that skips such rows.
type Undecodable struct {
	Table  string // schema.table
	Key    string // the row's primary key value
	Column string
	Value  string // "NULL" or the code
}

func (u Undecodable) String() string {
	return fmt.Sprintf("%s row %s: %s is %s, which the mapping cannot decode; counted nowhere", u.Table, u.Key, u.Column, u.Value)
}

// Batch is what the tailer hands to a Handler: the decoded rows of one or
// more whole transactions, in binlog order. A batch always ends at a
// transaction end, and End is the position just after that commit: resuming
// from it starts with the next transaction.
//
// The tailer reuses a Batch and its slices once ApplyBatch returns: a Handler
// must copy what it keeps.
type Batch struct {
	Transitions []Transition
	Redemptions []Redemption
	Flows       []Flow
	Quotas      []QuotaChange
	Templates   []TemplateChange
	Orders      []OrderRow
	Undecodable []Undecodable
	Rows        int // decoded row changes of the source tables (an UPDATE counts once)
	Txns        int // transactions that contributed at least one row
	End         Position
	// EventTime is the timestamp of the last binlog event the batch covers.
	// For a heartbeat sent while no event arrived for a HeartbeatPeriod (the
	// reader is caught up), it is the wall time of the heartbeat, so that
	// now-EventTime is the lag (~0).
	EventTime time.Time
	// Heartbeat marks an empty batch sent because no batch was delivered for
	// a HeartbeatPeriod: End still moves (other schemas' transactions), so
	// the consumer can save its checkpoint and report lag.
	Heartbeat bool
}

// Empty reports whether the batch carries no decoded rows.
func (b *Batch) Empty() bool { return b.Rows == 0 }

// reset empties b for reuse, keeping its slices' capacity.
func (b *Batch) reset() {
	clear(b.Transitions) // drop string references for the collector
	clear(b.Redemptions)
	clear(b.Flows)
	clear(b.Quotas)
	clear(b.Templates)
	clear(b.Orders)
	clear(b.Undecodable)
	b.Undecodable = b.Undecodable[:0]
	b.Transitions = b.Transitions[:0]
	b.Redemptions = b.Redemptions[:0]
	b.Flows = b.Flows[:0]
	b.Quotas = b.Quotas[:0]
	b.Templates = b.Templates[:0]
	b.Orders = b.Orders[:0]
	b.Rows, b.Txns = 0, 0
	b.End = Position{}
	b.EventTime = time.Time{}
	b.Heartbeat = false
}

// appendTx appends the rows of one committed transaction.
func (b *Batch) appendTx(tx *Batch) {
	b.Transitions = append(b.Transitions, tx.Transitions...)
	b.Flows = append(b.Flows, tx.Flows...)
	b.Quotas = append(b.Quotas, tx.Quotas...)
	before := len(b.Transitions) - len(tx.Transitions) // the tx's Transitions are appended already
	for _, r := range tx.Redemptions {
		r.After += before
		b.Redemptions = append(b.Redemptions, r)
	}
	for _, t := range tx.Templates {
		t.After += before
		b.Templates = append(b.Templates, t)
	}
	for _, o := range tx.Orders {
		o.After += before
		b.Orders = append(b.Orders, o)
	}
	b.Undecodable = append(b.Undecodable, tx.Undecodable...)
	b.Rows += tx.Rows
	b.Txns++
}
