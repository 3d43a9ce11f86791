package coupon

import (
	"context"
	"database/sql"
	"fmt"
)

// Counts are the states of a template's or a channel's quota.
//
//	quota     = claimable + held + used + frozen     (conservation)
//	claimable = quota - claimed                      (channel_quota)
//	frozen    = expired + returned - released        (slots neither claimable nor held nor used)
type Counts struct {
	Quota     int64 `json:"quota"`
	Claimed   int64 `json:"claimed"`
	Claimable int64 `json:"claimable"`
	Held      int64 `json:"held"`
	Used      int64 `json:"used"`
	Expired   int64 `json:"expired"`
	Returned  int64 `json:"returned"`
	Released  int64 `json:"released"`
	Frozen    int64 `json:"frozen"`
}

// Conserved reports whether quota = claimable + held + used + frozen with
// every term non-negative.
func (c Counts) Conserved() bool {
	return c.Claimable >= 0 && c.Held >= 0 && c.Used >= 0 && c.Frozen >= 0 &&
		c.Quota == c.Claimable+c.Held+c.Used+c.Frozen
}

func (c *Counts) add(o Counts) {
	c.Quota += o.Quota
	c.Claimed += o.Claimed
	c.Held += o.Held
	c.Used += o.Used
	c.Expired += o.Expired
	c.Returned += o.Returned
	c.Released += o.Released
}

func (c *Counts) derive() {
	c.Claimable = c.Quota - c.Claimed
	c.Frozen = c.Expired + c.Returned - c.Released
}

// Inventory is a template's quota, counted live from MySQL.
type Inventory struct {
	TemplateID int64 `json:"template_id"`
	TotalQuota int64 `json:"total_quota"`
	Counts
	Channels map[string]Counts `json:"channels"`
}

// Inventory counts the four states of a template per channel and in total,
// from user_coupon, channel_quota and inventory_flow, in one consistent
// snapshot.
func (s *Store) Inventory(ctx context.Context, templateID int64) (Inventory, error) {
	inv := Inventory{TemplateID: templateID, Channels: map[string]Counts{}}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return inv, fmt.Errorf("begin snapshot: %w", err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, `SELECT total_quota FROM coupon_template WHERE id = ?`, templateID).Scan(&inv.TotalQuota); err == sql.ErrNoRows {
		return inv, NotFound("template", templateID)
	} else if err != nil {
		return inv, fmt.Errorf("read template %d: %w", templateID, err)
	}
	ch := map[string]*Counts{}
	get := func(name string) *Counts {
		if ch[name] == nil {
			ch[name] = &Counts{}
		}
		return ch[name]
	}
	if err := eachRow(ctx, tx, `SELECT channel, quota, claimed FROM channel_quota WHERE template_id = ?`, []any{templateID},
		func(r *sql.Rows) error {
			var name string
			var q, c int64
			if err := r.Scan(&name, &q, &c); err != nil {
				return err
			}
			get(name).Quota, get(name).Claimed = q, c
			return nil
		}); err != nil {
		return inv, fmt.Errorf("read channel quotas: %w", err)
	}
	if err := eachRow(ctx, tx, `SELECT channel, status, COUNT(*) FROM user_coupon WHERE template_id = ? GROUP BY channel, status`,
		[]any{templateID}, func(r *sql.Rows) error {
			var name string
			var st Status
			var n int64
			if err := r.Scan(&name, &st, &n); err != nil {
				return err
			}
			c := get(name)
			switch st {
			case Available:
				c.Held += n
			case Used:
				c.Used += n
			case Expired:
				c.Expired += n
			case Returned:
				c.Returned += n
			}
			return nil
		}); err != nil {
		return inv, fmt.Errorf("count coupons: %w", err)
	}
	if err := eachRow(ctx, tx, `SELECT channel, COUNT(*) FROM inventory_flow WHERE template_id = ? AND kind = ? GROUP BY channel`,
		[]any{templateID, FlowRelease}, func(r *sql.Rows) error {
			var name string
			var n int64
			if err := r.Scan(&name, &n); err != nil {
				return err
			}
			get(name).Released = n
			return nil
		}); err != nil {
		return inv, fmt.Errorf("count releases: %w", err)
	}
	for name, c := range ch {
		c.derive()
		inv.Channels[name] = *c
		inv.Counts.add(*c)
	}
	inv.Counts.derive()
	return inv, nil
}

func eachRow(ctx context.Context, tx *sql.Tx, q string, args []any, fn func(*sql.Rows) error) error {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
