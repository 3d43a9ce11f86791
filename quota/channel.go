package quota

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/internal/sqltx"
	inventoryview "github.com/couponlink/couponlink/inventory/view"
)

// Channel is one channel bucket of a template, as the rule sees it: its
// quota and claim guard (channel_quota) and its derived state counts
// (inventory_counter, at the cdc's checkpoint).
type Channel struct {
	Name     string `json:"channel"`
	Quota    int64  `json:"quota"`
	Claimed  int64  `json:"claimed"` // the claim guard: slots taken and not released
	Held     int64  `json:"held"`
	Used     int64  `json:"used"`
	Expired  int64  `json:"expired"`
	Returned int64  `json:"returned"`
	Released int64  `json:"released"`
}

// AddCounts adds the derived state counts n (held, used, expired,
// returned, released) to c; its quota and claim guard stay as they are.
func (c *Channel) AddCounts(n inventoryview.Counts) {
	c.Held += n.Held
	c.Used += n.Used
	c.Expired += n.Expired
	c.Returned += n.Returned
	c.Released += n.Released
}

// Claimable is the quota not claimed yet.
func (c Channel) Claimable() int64 { return max(c.Quota-c.Claimed, 0) }

// Claims is how many coupons the channel ever gave out.
func (c Channel) Claims() int64 { return c.Held + c.Used + c.Expired + c.Returned }

// Rate is the redemption rate, used / (claims − released): of the slots the
// channel's users still hold or consumed, the share redeemed. ok is false
// when no slot is held.
func (c Channel) Rate() (rate float64, ok bool) {
	return Rate(c.Used, c.Claims(), c.Released)
}

// Rate is used / (claims − released), the one definition of a redemption
// rate (the rule, the metric and the status views all use it).
func Rate(used, claims, released int64) (float64, bool) {
	d := claims - released
	if d <= 0 {
		return 0, false
	}
	return float64(used) / float64(d), true
}

// Transfer is one quota_transfer_log row: a move of Amount claimable
// quota From one channel To another, applied (mode auto) or recommended
// (mode signal).
type Transfer = api.Transfer

// ChannelView is one channel bucket as operators read it.
type ChannelView struct {
	Channel
	Claimable int64 `json:"claimable"`
	// RedemptionRate is nil while no slot is held (see Rate).
	RedemptionRate *float64 `json:"redemption_rate"`
	// LastTransfer is the newest applied move from or to the channel; nil: none.
	LastTransfer *Transfer `json:"last_transfer"`
}

// Channels is the template's channel buckets, by name: quota and claim
// guard, the cdc's counts (0 where it has none yet), redemption rate and
// the last applied transfer. It is read in one snapshot.
func Channels(ctx context.Context, db *sql.DB, template int64) ([]ChannelView, error) {
	out, _, err := ChannelsAt(ctx, db, template, "")
	return out, err
}

// CDCPosition is the named cdc checkpoint a read of its counters reflects.
type CDCPosition = api.CDCPosition

// ChannelsAt is Channels with, when checkpoint is not "", the position of
// that cdc checkpoint read in the same snapshot: the counts reflect it.
func ChannelsAt(ctx context.Context, db *sql.DB, template int64, checkpoint string) ([]ChannelView, *CDCPosition, error) {
	var out []ChannelView
	var pos *CDCPosition
	err := sqltx.Run(ctx, db, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}, func(tx *sql.Tx) error {
		if err := checkTemplate(ctx, tx, template); err != nil {
			return err
		}
		var err error
		if checkpoint != "" {
			if pos, err = readPosition(ctx, tx, checkpoint); err != nil {
				return err
			}
		}
		if out, err = channels(ctx, tx, template); err != nil {
			return err
		}
		for i := range out {
			if out[i].LastTransfer, err = lastTransfer(ctx, tx, template, out[i].Name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read channels of template %d: %w", template, err)
	}
	return out, pos, nil
}

// readPosition reads the named checkpoint's position in tx.
func readPosition(ctx context.Context, tx *sql.Tx, name string) (*CDCPosition, error) {
	p := &CDCPosition{Checkpoint: name}
	var file, gtid string
	var pos uint64
	var at sql.NullTime
	var saved time.Time
	err := tx.QueryRowContext(ctx, `SELECT binlog_file, binlog_pos, gtid_set, event_time, updated_at FROM cdc_checkpoint WHERE name = ?`, name).
		Scan(&file, &pos, &gtid, &at, &saved)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return p, nil
	case err != nil:
		return nil, fmt.Errorf("read checkpoint %q: %w", name, err)
	}
	p.Found, p.Position, p.SavedAt = file != "", fmt.Sprintf("%s:%d", file, pos), &saved
	if gtid != "" {
		p.Position += " gtid=" + gtid
	}
	if at.Valid {
		p.EventTime = &at.Time
	}
	return p, nil
}

func channels(ctx context.Context, tx *sql.Tx, template int64) ([]ChannelView, error) {
	rows, err := tx.QueryContext(ctx, `SELECT q.channel, q.quota, q.claimed, COALESCE(c.held, 0), COALESCE(c.used, 0),
		COALESCE(c.expired, 0), COALESCE(c.returned, 0), COALESCE(c.released, 0)
		FROM channel_quota q LEFT JOIN inventory_counter c ON c.template_id = q.template_id AND c.channel = q.channel
		WHERE q.template_id = ? ORDER BY q.channel`, template)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []ChannelView{}
	for rows.Next() {
		var c Channel
		if err := rows.Scan(&c.Name, &c.Quota, &c.Claimed, &c.Held, &c.Used, &c.Expired, &c.Returned, &c.Released); err != nil {
			return nil, err
		}
		v := ChannelView{Channel: c, Claimable: c.Claimable()}
		if r, ok := c.Rate(); ok {
			v.RedemptionRate = &r
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// lastTransfer is the newest auto transfer from or to the channel; it
// walks idx_quota_transfer_mode backwards from the newest row.
func lastTransfer(ctx context.Context, tx *sql.Tx, template int64, channel string) (*Transfer, error) {
	var t Transfer
	err := tx.QueryRowContext(ctx, `SELECT id, decision, from_channel, to_channel, amount, rule, mode, created_at
		FROM quota_transfer_log
		WHERE template_id = ? AND mode = 'auto' AND (from_channel = ? OR to_channel = ?)
		ORDER BY created_at DESC, id DESC LIMIT 1`, template, channel, channel).
		Scan(&t.ID, &t.Decision, &t.From, &t.To, &t.Amount, &t.Rule, &t.Mode, &t.At)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read the last transfer of channel %q: %w", channel, err)
	}
	return &t, nil
}

// maxAttempts bounds the runs of a policy transaction that deadlocked: two
