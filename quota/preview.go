package quota

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/internal/sqltx"
)

// ruleInput is what the rule sees of a template besides its channels: its
// age (since its created_at) and the last decision of p's mode. found is
// false when the template has no row. The cdc's pass (decide) and Preview
// both read it here.
func ruleInput(ctx context.Context, q queryer, tpl int64, p Policy, chans []Channel, now time.Time) (in Input, found bool, err error) {
	var created time.Time
	err = q.QueryRowContext(ctx, `SELECT created_at FROM coupon_template WHERE id = ?`, tpl).Scan(&created)
	if errors.Is(err, sql.ErrNoRows) {
		return Input{}, false, nil
	}
	if err != nil {
		return Input{}, false, fmt.Errorf("read the template: %w", err)
	}
	last, err := lastDecision(ctx, q, tpl, p.Mode)
	if err != nil {
		return Input{}, false, err
	}
	return Input{Template: tpl, Policy: p, Channels: chans, Age: now.Sub(created), LastMove: last, Now: now}, true, nil
}

// Preview is what the rule would decide now for the template with change
// applied over its policy in force (an empty change: the policy in force),
// by the cdc's own reads and rule: the channel buckets with the cdc's
// counts at its checkpoint, the campaign's age, the last decision of the
// mode, then Decide. Nothing is written, whatever the mode. The policy is
// validated as SetPolicy would (an invalid_argument naming the field).
func Preview(ctx context.Context, db *sql.DB, template int64, change Override, now time.Time) (Input, Decision, error) {
	return preview(ctx, db, template, change, "template", checkTemplate, func(tx *sql.Tx, p Policy) (Input, error) {
		views, err := channels(ctx, tx, template)
		if err != nil {
			return Input{}, err
		}
		chans := make([]Channel, len(views))
		for i, v := range views {
			chans[i] = v.Channel
		}
		in, _, err := ruleInput(ctx, tx, template, p, chans, now)
		return in, err
	})
}

// preview reads in one read-only snapshot what a preview decides on: the
// template (check refuses one that is not there or not of its kind, what
// names the kind in errors), its policy in force with change over it, and
// input's reads of the rest; then Decide.
func preview(ctx context.Context, db *sql.DB, template int64, change Override, what string,
	check func(context.Context, queryer, int64) error, input func(*sql.Tx, Policy) (Input, error)) (Input, Decision, error) {
	var in Input
	err := sqltx.Run(ctx, db, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}, func(tx *sql.Tx) error {
		if err := check(ctx, tx, template); err != nil {
			return err
		}
		p, err := policyWith(ctx, tx, template, change)
		if err != nil {
			return err
		}
		in, err = input(tx, p)
		return err
	})
	if err != nil {
		return Input{}, Decision{}, fmt.Errorf("preview the rule of %s %d: %w", what, template, err)
	}
	return in, Decide(in), nil
}

// policyWith is the template's policy in force with change applied over
// it, validated as SetPolicy would.
func policyWith(ctx context.Context, q queryer, template int64, change Override) (Policy, error) {
	defaults, err := readDefaults(ctx, q)
	if err != nil {
		return Policy{}, err
	}
	row, _, err := readPolicy(ctx, q, template, false)
	if err != nil {
		return Policy{}, err
	}
	p := row.Override.Merge(change).Apply(defaults)
	return p, p.Validate()
}

// lastDecision is the time of the template's last decision of mode (zero:
// none), which the cooldown counts from.
func lastDecision(ctx context.Context, q queryer, template int64, mode string) (time.Time, error) {
	var last sql.NullTime
	if err := q.QueryRowContext(ctx, `SELECT MAX(created_at) FROM quota_transfer_log WHERE template_id = ? AND mode = ?`,
		template, mode).Scan(&last); err != nil {
		return time.Time{}, fmt.Errorf("read the last decision: %w", err)
	}
	return last.Time, nil
}
