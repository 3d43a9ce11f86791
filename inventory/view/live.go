package view

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// Inventory is a template's quota counted live from MySQL, per channel and
// in total, and, when asked for, the cdc's counters beside it. It is what
// GET /v1/templates/{id}/inventory answers.
type Inventory struct {
	TemplateID int64
	TotalQuota int64
	Counts     // the template's total
	Channels   map[string]Counts
	Derived    *Derived // the cdc's counters; nil: not asked for
}

// MarshalJSON shows the counts with their claimable and frozen, and
// whether the total is conserved, as an api.Inventory.
func (inv Inventory) MarshalJSON() ([]byte, error) {
	v := api.Inventory{TemplateID: inv.TemplateID, TotalQuota: inv.TotalQuota, Counts: countsOf(inv.Counts),
		Channels: make(map[string]api.Counts, len(inv.Channels)), Conserved: inv.Conserved()}
	if inv.Derived != nil {
		d := inv.Derived.wire()
		v.Derived = &d
	}
	for ch, c := range inv.Channels {
		v.Channels[ch] = countsOf(c)
	}
	return json.Marshal(v)
}

// Reader reads the inventory of a template, as the API shows it.
type Reader struct {
	DB *sql.DB
	// Checkpoint names the cdc whose counters are shown beside the live
	// count (Inventory.Derived); "" shows none.
	Checkpoint string
}

// Inventory counts a template live and reads the cdc's counters of it.
func (r Reader) Inventory(ctx context.Context, templateID int64) (Inventory, error) {
	inv, err := Live(ctx, r.DB, templateID)
	if err != nil || r.Checkpoint == "" {
		return inv, err
	}
	d, err := ReadDerived(ctx, r.DB, r.Checkpoint, templateID)
	if err != nil {
		return inv, err
	}
	inv.Derived = &d
	return inv, nil
}

// Live counts the four states of a template per channel and in total,
// from user_coupon, channel_quota and inventory_flow (the reference
// schema), in one consistent snapshot. An unknown template is
// coupon.NotFound.
func Live(ctx context.Context, db *sql.DB, templateID int64) (Inventory, error) {
	inv := Inventory{TemplateID: templateID, Channels: map[string]Counts{}}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return inv, fmt.Errorf("begin snapshot: %w", err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, `SELECT total_quota FROM coupon_template WHERE id = ?`, templateID).Scan(&inv.TotalQuota); err == sql.ErrNoRows {
		return inv, coupon.NotFound("template", templateID)
	} else if err != nil {
		return inv, fmt.Errorf("read template %d: %w", templateID, err)
	}
	ch, err := liveChannels(ctx, tx, templateID)
	if err != nil {
		return inv, err
	}
	for name, c := range ch {
		inv.Channels[name] = *c
		inv.Counts.Add(*c)
	}
	return inv, nil
}

// liveChannels counts a template's channels in tx.
func liveChannels(ctx context.Context, tx *sql.Tx, templateID int64) (map[string]*Counts, error) {
	ch := map[string]*Counts{}
	get := func(name string) *Counts {
		if ch[name] == nil {
			ch[name] = &Counts{}
		}
		return ch[name]
	}
	if err := sqltx.EachRow(ctx, tx, `SELECT channel, quota, claimed FROM channel_quota WHERE template_id = ?`, []any{templateID},
		func(r *sql.Rows) error {
			var name string
			var q, c int64
			if err := r.Scan(&name, &q, &c); err != nil {
				return err
			}
			get(name).Quota, get(name).Claimed = q, c
			return nil
		}); err != nil {
		return nil, fmt.Errorf("read channel quotas: %w", err)
	}
	if err := sqltx.EachRow(ctx, tx, `SELECT channel, status, COUNT(*) FROM user_coupon WHERE template_id = ? GROUP BY channel, status`,
		[]any{templateID}, func(r *sql.Rows) error {
			var name string
			var st coupon.Status
			var n int64
			if err := r.Scan(&name, &st, &n); err != nil {
				return err
			}
			get(name).Bump(st, n)
			return nil
		}); err != nil {
		return nil, fmt.Errorf("count coupons: %w", err)
	}
	if err := sqltx.EachRow(ctx, tx, `SELECT channel, COUNT(*) FROM inventory_flow WHERE template_id = ? AND kind = ? GROUP BY channel`,
		[]any{templateID, coupon.FlowRelease}, func(r *sql.Rows) error {
			var name string
			var n int64
			if err := r.Scan(&name, &n); err != nil {
				return err
			}
			get(name).Released = n
			return nil
		}); err != nil {
		return nil, fmt.Errorf("count releases: %w", err)
	}
	return ch, nil
}
