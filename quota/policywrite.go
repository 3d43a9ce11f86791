package quota

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// Changes of a policy: set, reset and the published defaults, each with
// its quota_policy_audit row in the same transaction.

// Sources of a policy change, as recorded in quota_policy_audit.
const (
	SourceCLI     = "cli"
	SourceAPI     = "api"
	SourceConsole = "console" // the API, called by its console
	SourceConfig  = "config"
)

// Actions of quota_policy_audit.
const (
	ActionSet   = "set"
	ActionReset = "reset"
)

// Limits of who and why of a change, as the API documents them (the
// changed_by column is wider: the defaults' publisher, maxPublisherLen).
const (
	MaxChangedByLen = 64
	MaxReasonLen    = 255
	maxPublisherLen = 128
)

// checkChange validates who and why of a change.
func checkChange(by, reason string) error {
	switch {
	case by == "":
		return coupon.Invalid("changed_by", "changed_by is required: who makes the change (a name or login)")
	case len(by) > MaxChangedByLen:
		return coupon.Invalid("changed_by", "changed_by is longer than %d bytes", MaxChangedByLen)
	case reason == "":
		return coupon.Invalid("reason", "reason is required: why the policy changes (e.g. a ticket)")
	case len(reason) > MaxReasonLen:
		return coupon.Invalid("reason", "reason is longer than %d bytes", MaxReasonLen)
	}
	if err := coupon.CheckText(false, "changed_by", by); err != nil {
		return err
	}
	return coupon.CheckText(true, "reason", reason)
}

// SetPolicy merges change into the template's override (a partial update:
// the fields change leaves nil keep their value), validates the result
// over the current defaults, and writes the row (version + 1) with its
// audit row, in one transaction. A change that changes nothing writes
// nothing and returns the current view. by and reason are checked as
// given; identity is the name of the token that sent the change ("" for
// none): with one, the rows record it, and by, when another name, as the
// one it acts for (on_behalf_of; see coupon.Acting).
func SetPolicy(ctx context.Context, db *sql.DB, template int64, change Override, by, reason, source, identity string) (PolicyView, error) {
	return setPolicy(ctx, db, template, change, author{by, reason, source, identity}, checkTemplate)
}

// author is who changes a policy, why and how: by and reason as given,
// source (cli, api, console), and the token's name (identity, "" for
// none).
type author struct{ by, reason, source, identity string }

// check trims and validates by and reason, and is then who the rows
// record: by, or the identity and by as the one it acts for.
func (a *author) check() (onBehalfOf string, err error) {
	a.by, a.reason = strings.TrimSpace(a.by), strings.TrimSpace(a.reason)
	if err := checkChange(a.by, a.reason); err != nil {
		return "", err
	}
	a.by, onBehalfOf = coupon.Acting(a.by, a.identity)
	return onBehalfOf, nil
}

// setPolicy is SetPolicy with check saying whether template is one whose
// policy may be set.
func setPolicy(ctx context.Context, db *sql.DB, template int64, change Override, a author,
	check func(context.Context, queryer, int64) error) (PolicyView, error) {
	behalf, err := a.check()
	if err != nil {
		return PolicyView{}, err
	}
	if change.Empty() {
		return PolicyView{}, coupon.Invalid("", "the change sets no field: send at least one of mode, low, high, min_claims, max_share, reserve, cooldown_seconds, min_age_seconds")
	}
	var out PolicyView
	err = sqltx.Retry(ctx, db, maxAttempts, raced, func(tx *sql.Tx) error {
		if err := check(ctx, tx, template); err != nil {
			return err
		}
		defaults, err := readDefaults(ctx, tx)
		if err != nil {
			return err
		}
		out, _, err = write(ctx, tx, template, defaults, change, a.by, behalf, a.reason, a.source)
		return err
	})
	if err != nil {
		return PolicyView{}, fmt.Errorf("set quota policy of template %d: %w", template, err)
	}
	return out, nil
}

// write merges change into the locked row of template, checks the result
// over defaults, and writes it with its audit row unless nothing changes;
// changed says whether it wrote.
func write(ctx context.Context, tx *sql.Tx, template int64, defaults Policy, change Override, by, behalf, reason, source string) (v PolicyView, changed bool, err error) {
	row, found, err := readPolicy(ctx, tx, template, true)
	if err != nil {
		return PolicyView{}, false, err
	}
	merged := row.Override.Merge(change)
	if err := merged.Apply(defaults).Validate(); err != nil {
		return PolicyView{}, false, err
	}
	before, after := overrideJSON(row.Override, found), overrideJSON(merged, true)
	if found && before.String == after.String {
		return makeView(template, defaults, row, found), false, nil
	}
	version, err := nextVersion(ctx, tx, template, row, found)
	if err != nil {
		return PolicyView{}, false, err
	}
	args := []any{merged.Mode, merged.Low, merged.High, merged.MinClaims, merged.MaxShare, merged.Reserve,
		merged.CooldownSeconds, merged.MinAgeSeconds, version, by}
	if found {
		_, err = tx.ExecContext(ctx, `UPDATE quota_policy SET mode = ?, low = ?, high = ?, min_claims = ?, max_share = ?,
			reserve = ?, cooldown_seconds = ?, min_age_seconds = ?, version = ?, updated_by = ?, updated_at = UTC_TIMESTAMP(6)
			WHERE template_id = ?`, append(args, template)...)
	} else {
		_, err = tx.ExecContext(ctx, `INSERT INTO quota_policy (mode, low, high, min_claims, max_share, reserve,
			cooldown_seconds, min_age_seconds, version, updated_by, updated_at, template_id)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), ?)`, append(args, template)...)
	}
	if err != nil {
		return PolicyView{}, false, fmt.Errorf("write quota policy row: %w", err)
	}
	if err := audit(ctx, tx, template, version, ActionSet, before, after, by, behalf, reason, source); err != nil {
		return PolicyView{}, false, err
	}
	v, err = view(ctx, tx, template, false)
	return v, true, err
}

// nextVersion is the version of the next change of template's row: one
// above the last, counting changes before a reset too, so that versions
// of a template never repeat in its audit.
func nextVersion(ctx context.Context, tx *sql.Tx, template int64, row policyRow, found bool) (int64, error) {
	var last sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT version FROM quota_policy_audit WHERE template_id = ? ORDER BY id DESC LIMIT 1`,
		template).Scan(&last)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("read the last audited version of template %d: %w", template, err)
	}
	v := last.Int64
	if found {
		v = max(v, row.Version)
	}
	return v + 1, nil
}

func overrideJSON(o Override, found bool) sql.NullString {
	if !found {
		return sql.NullString{}
	}
	b, _ := json.Marshal(o) // pointers to strings, floats (validated, not NaN) and ints: cannot fail
	return sql.NullString{String: string(b), Valid: true}
}

// audit writes the change's quota_policy_audit row: by is who, behalf who
// they acted for ("" for none: NULL).
func audit(ctx context.Context, tx *sql.Tx, template, version int64, action string, before, after sql.NullString, by, behalf, reason, source string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO quota_policy_audit
		(template_id, version, action, before_json, after_json, changed_by, on_behalf_of, reason, source, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6))`, template, version, action, before, after, by,
		sql.NullString{String: behalf, Valid: behalf != ""}, reason, source)
	if err != nil {
		return fmt.Errorf("write quota policy audit row: %w", err)
	}
	return nil
}

// ResetPolicy deletes the template's override, so that it follows the
// defaults again, with its audit row. A template without an override is
// left as it is and nothing is written. Who, why and the identity are as
// for SetPolicy.
func ResetPolicy(ctx context.Context, db *sql.DB, template int64, by, reason, source, identity string) (PolicyView, error) {
	return resetPolicy(ctx, db, template, author{by, reason, source, identity}, checkTemplate)
}

// resetPolicy is ResetPolicy with check saying whether template is one
// whose policy may be reset.
func resetPolicy(ctx context.Context, db *sql.DB, template int64, a author,
	check func(context.Context, queryer, int64) error) (PolicyView, error) {
	behalf, err := a.check()
	if err != nil {
		return PolicyView{}, err
	}
	var out PolicyView
	err = sqltx.Retry(ctx, db, maxAttempts, raced, func(tx *sql.Tx) error {
		if err := check(ctx, tx, template); err != nil {
			return err
		}
		row, found, err := readPolicy(ctx, tx, template, true)
		if err != nil || !found {
			if err == nil {
				out, err = view(ctx, tx, template, false)
			}
			return err
		}
		version, err := nextVersion(ctx, tx, template, row, found)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM quota_policy WHERE template_id = ?`, template); err != nil {
			return fmt.Errorf("delete quota policy row: %w", err)
		}
		if err := audit(ctx, tx, template, version, ActionReset, overrideJSON(row.Override, true), sql.NullString{},
			a.by, behalf, a.reason, a.source); err != nil {
			return err
		}
		out, err = view(ctx, tx, template, false)
		return err
	})
	if err != nil {
		return PolicyView{}, fmt.Errorf("reset quota policy of template %d: %w", template, err)
	}
	return out, nil
}

// PublishDefaults writes p, every field set, as the defaults row (template
// 0), audited with source config, when it differs from the row; changed
// says whether it did. The cdc calls it at start with its configuration.
func PublishDefaults(ctx context.Context, db *sql.DB, p Policy, by string) (changed bool, err error) {
	if err := p.Validate(); err != nil {
		return false, err
	}
	if by = strings.TrimSpace(by); by == "" || len(by) > maxPublisherLen {
		return false, coupon.Invalid("changed_by", "changed_by must be 1 to %d bytes: who publishes the defaults", maxPublisherLen)
	}
	err = sqltx.Retry(ctx, db, maxAttempts, raced, func(tx *sql.Tx) error {
		// the defaults row sets every field, so it is checked over nothing but itself
		_, changed, err = write(ctx, tx, DefaultsTemplate, Defaults(), p.Full(), by, "",
			"defaults published from the cdc configuration", SourceConfig)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("publish quota policy defaults: %w", err)
	}
	return changed, nil
}

// first writes of the same row both lock its gap, and one of them loses.
const maxAttempts = 10

func raced(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205 || me.Number == 1062)
}
