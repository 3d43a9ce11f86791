package view

import (
	"encoding/json"
	"time"
)

// Template is a legacy shop's template as people see it: its row in the
// shop's template table, read through the mapping (name, budget, the
// shop's own remaining stock, per-user limit, end time), beside the cdc's
// counters of its coupons (Counts, summed over Channels).
//
// A shop that compares the campaign's end_time at read time never writes
// EXPIRED: once the campaign has ended (Ended), its AVAILABLE coupons can
// no longer be used, so they are shown as expired (counted in Expired, not
// Held; PastEnd says how many), and nothing is claimable. So are the
// AVAILABLE coupons past their own expires_at (PastOwnExpiry).
type Template struct {
	ID    int64
	Found bool // the template table has a row of it
	Name  string
	// Budget is the template's total quota; HasBudget is false when it is
	// NULL (or there is no row).
	Budget    int64
	HasBudget bool
	// Remaining is the shop's own remaining-stock column; nil when the
	// mapping names none or it is NULL.
	Remaining    *int64
	PerUserLimit int64     // 0: none
	EndTime      time.Time // zero: none
	Ended        bool      // the campaign had ended when it was read
	// Window: a fixed-window campaign (template.fixed_window), whose
	// coupons follow its end, not their own expires_at.
	Window bool
	// Unlimited: its budget means no limit (template.unlimited); OffShelf:
	// the campaign is off the shelf (status or soft delete): nothing is
	// claimable.
	Unlimited, OffShelf bool
	Counts              // the counters, PastEnd moved from Held to Expired
	PastEnd             int64
	Channels            []Channel // by channel value
}

// Channel is one channel of a Template: its stored value, the label the
// mapping gives it, and its counters as the template shows them.
type Channel struct {
	Name     string // the stored value (the default channel for none)
	Label    string // "" when the mapping has no label for it
	Counts          // Quota and Claimed when HasQuota
	HasQuota bool   // the mapping has channel quotas and this bucket
	PastEnd  int64
	// PastOwn is how many AVAILABLE coupons were past their own
	// expires_at when read, whether or not the campaign's rules (Expire)
	// count them as expired.
	PastOwn int64
}

// Display is the channel's name with its label: "1 (self-service)".
func (c Channel) Display() string { return Labelled(c.Name, c.Label) }

// Labelled is a stored channel value with its label, when it has one.
func Labelled(name, label string) string {
	if label == "" {
		return name
	}
	return name + " (" + label + ")"
}

// PastEnd counts c's AVAILABLE coupons as expired, for a campaign that
// has ended, and says how many it moved. Taken is unchanged.
func PastEnd(c Counts) (Counts, int64) {
	n := c.Held
	c.Held, c.Expired = 0, c.Expired+n
	return c, n
}

// PastOwnExpiry counts n of c's AVAILABLE coupons (past their own
// expires_at) as expired, and says how many it moved.
func PastOwnExpiry(c Counts, n int64) (Counts, int64) {
	n = min(n, c.Held)
	c.Held, c.Expired = c.Held-n, c.Expired+n
	return c, n
}

// Expire counts c (as the counters hold it) as people see it under the
// campaign's rules: once the campaign has ended, every AVAILABLE coupon is
// expired (PastEnd); before, the pastOwn past their own expires_at are
// (PastOwnExpiry), unless the campaign is a fixed window (its coupons
// follow its end). It says how many it moved.
func Expire(c Counts, pastOwn int64, ended, window bool) (Counts, int64) {
	switch {
	case ended:
		return PastEnd(c)
	case pastOwn > 0 && !window:
		return PastOwnExpiry(c, pastOwn)
	}
	return c, 0
}

// Read is the channel's counts as the counters hold them (Unexpire).
func (c Channel) Read() Counts { return Unexpire(c.Counts, c.PastEnd) }

// Unexpire is c as the counters hold it, before Expire moved pastEnd of
// its coupons from Held to Expired.
func Unexpire(c Counts, pastEnd int64) Counts {
	c.Held, c.Expired = c.Held+pastEnd, c.Expired-pastEnd
	return c
}

// Taken is what the template's budget must cover: held + used + frozen
// over its channels.
func (t Template) Taken() int64 { return t.Counts.Taken() }

// Claimable is what is left to give out of the budget: budget − taken (a
// negative value is an over-issue), and 0 once the campaign has ended or
// is off the shelf. known is false without a budget and for an unlimited
// one (Unlimited says which).
func (t Template) Claimable() (n int64, known bool) {
	switch {
	case !t.HasBudget && !t.Unlimited:
		return 0, false
	case t.Ended || t.OffShelf:
		return 0, true
	case t.Unlimited:
		return 0, false
	}
	return t.Budget - t.Taken(), true
}

type templateChannelJSON struct {
	Channel   string `json:"channel"`
	Label     string `json:"label,omitempty"`
	Quota     *int64 `json:"quota,omitempty"`
	Claimable *int64 `json:"claimable,omitempty"`
	States
	PastEnd int64 `json:"expired_by_end_time,omitempty"`
}

// MarshalJSON shows the template as `couponlink status -json` prints it:
// {"template", "found", "name", "budget", "remaining", "claimable",
// "per_user_limit", "end_time", "ended", "held", ..., "frozen",
// "expired_by_end_time", "channels"} ("unlimited" and "off_shelf" when
// true); budget and claimable are null without a budget or with an
// unlimited one (then "unlimited": true; 0 off the shelf), remaining, per_user_limit and end_time absent when
// the template has none.
func (t Template) MarshalJSON() ([]byte, error) {
	v := struct {
		ID           int64      `json:"template"`
		Found        bool       `json:"found"`
		Name         string     `json:"name,omitempty"`
		Budget       *int64     `json:"budget"`
		Remaining    *int64     `json:"remaining,omitempty"`
		Claimable    *int64     `json:"claimable"`
		PerUserLimit int64      `json:"per_user_limit,omitempty"`
		EndTime      *time.Time `json:"end_time,omitempty"`
		Ended        bool       `json:"ended"`
		Unlimited    bool       `json:"unlimited,omitempty"`
		OffShelf     bool       `json:"off_shelf,omitempty"`
		States
		PastEnd  int64                 `json:"expired_by_end_time"`
		Channels []templateChannelJSON `json:"channels"`
	}{ID: t.ID, Found: t.Found, Name: t.Name, Remaining: t.Remaining, PerUserLimit: t.PerUserLimit, Ended: t.Ended,
		Unlimited: t.Unlimited, OffShelf: t.OffShelf, States: StatesOf(t.Counts), PastEnd: t.PastEnd, Channels: make([]templateChannelJSON, 0, len(t.Channels))}
	if t.HasBudget {
		v.Budget = &t.Budget
	}
	if n, ok := t.Claimable(); ok {
		v.Claimable = &n
	}
	if !t.EndTime.IsZero() {
		end := t.EndTime.UTC()
		v.EndTime = &end
	}
	for _, c := range t.Channels {
		cj := templateChannelJSON{Channel: c.Name, Label: c.Label, States: StatesOf(c.Counts), PastEnd: c.PastEnd}
		if c.HasQuota {
			q, n := c.Quota, c.Counts.Claimable()
			cj.Quota, cj.Claimable = &q, &n
		}
		v.Channels = append(v.Channels, cj)
	}
	return json.Marshal(v)
}
