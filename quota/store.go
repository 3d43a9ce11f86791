package quota

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// DefaultsTemplate is the quota_policy row that holds the defaults the cdc
// runs with (no template has id 0).
const DefaultsTemplate int64 = 0

// Sources of a policy change, as recorded in quota_policy_audit.
const (
	SourceCLI    = "cli"
	SourceAPI    = "api"
	SourceConfig = "config"
)

// Actions of quota_policy_audit.
const (
	ActionSet   = "set"
	ActionReset = "reset"
)

// Limits of the audit columns.
const (
	MaxChangedByLen = 128
	MaxReasonLen    = 255
)

// PolicyView is a template's policy as operators read it: what applies,
// the defaults it inherits, and what its override row sets.
type PolicyView struct {
	Template  int64      `json:"template"`
	Effective Policy     `json:"effective"`
	Defaults  Policy     `json:"defaults"`
	Override  Override   `json:"override"`
	Version   int64      `json:"version"`    // 0: no override row
	UpdatedBy string     `json:"updated_by"` // "" when no override row
	UpdatedAt *time.Time `json:"updated_at"` // nil when no override row
}

// AuditEntry is one change of a policy row.
type AuditEntry struct {
	ID        int64     `json:"id"`
	Template  int64     `json:"template"`
	Version   int64     `json:"version"`
	Action    string    `json:"action"`
	Before    *Override `json:"before"` // nil: there was no row
	After     *Override `json:"after"`  // nil: the row was deleted
	ChangedBy string    `json:"changed_by"`
	Reason    string    `json:"reason"`
	Source    string    `json:"source"`
	At        time.Time `json:"at"`
}

// policyRow is one quota_policy row.
type policyRow struct {
	Override  Override
	Version   int64
	UpdatedBy string
	UpdatedAt time.Time
}

const policyColumns = `mode, low, high, min_claims, max_share, reserve, cooldown_seconds, min_age_seconds, version, updated_by, updated_at`

type scanner interface{ Scan(...any) error }

func scanPolicy(r scanner, extra ...any) (policyRow, error) {
	var (
		p                           policyRow
		mode                        sql.NullString
		low, high, share, reserve   sql.NullFloat64
		minClaims, cooldown, minAge sql.NullInt64
	)
	dst := append(extra, &mode, &low, &high, &minClaims, &share, &reserve, &cooldown, &minAge, &p.Version, &p.UpdatedBy, &p.UpdatedAt)
	if err := r.Scan(dst...); err != nil {
		return p, err
	}
	o := &p.Override
	o.Mode = nullable(mode.String, mode.Valid)
	o.Low, o.High = nullable(low.Float64, low.Valid), nullable(high.Float64, high.Valid)
	o.MaxShare, o.Reserve = nullable(share.Float64, share.Valid), nullable(reserve.Float64, reserve.Valid)
	o.MinClaims = nullable(minClaims.Int64, minClaims.Valid)
	o.CooldownSeconds, o.MinAgeSeconds = nullable(cooldown.Int64, cooldown.Valid), nullable(minAge.Int64, minAge.Valid)
	return p, nil
}

func nullable[T any](v T, valid bool) *T {
	if !valid {
		return nil
	}
	return &v
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readPolicy reads a template's policy row; found is false when it has none.
func readPolicy(ctx context.Context, q queryer, template int64, lock bool) (p policyRow, found bool, err error) {
	query := `SELECT ` + policyColumns + ` FROM quota_policy WHERE template_id = ?`
	if lock {
		query += ` FOR UPDATE`
	}
	p, err = scanPolicy(q.QueryRowContext(ctx, query, template))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return policyRow{}, false, nil
	case err != nil:
		return p, false, fmt.Errorf("read quota policy of template %d: %w", template, err)
	}
	return p, true, nil
}

// readDefaults is Defaults() with the defaults row applied over it.
func readDefaults(ctx context.Context, q queryer) (Policy, error) {
	row, _, err := readPolicy(ctx, q, DefaultsTemplate, false)
	if err != nil {
		return Policy{}, err
	}
	return row.Override.Apply(Defaults()), nil
}

// LoadPolicies reads every policy row: defaults is Defaults() with the
// defaults row (template 0) applied over it, overrides holds every other
// row by template. A template's policy is overrides[id].Apply(defaults).
func LoadPolicies(ctx context.Context, db *sql.DB) (defaults Policy, overrides map[int64]Override, err error) {
	rows, err := db.QueryContext(ctx, `SELECT template_id, `+policyColumns+` FROM quota_policy`)
	if err != nil {
		return Policy{}, nil, fmt.Errorf("load quota policies: %w", err)
	}
	defer rows.Close()
	defaults, overrides = Defaults(), map[int64]Override{}
	for rows.Next() {
		var id int64
		p, err := scanPolicy(rows, &id)
		if err != nil {
			return Policy{}, nil, fmt.Errorf("load quota policies: %w", err)
		}
		if id == DefaultsTemplate {
			defaults = p.Override.Apply(defaults)
		} else {
			overrides[id] = p.Override
		}
	}
	if err := rows.Err(); err != nil {
		return Policy{}, nil, fmt.Errorf("load quota policies: %w", err)
	}
	return defaults, overrides, nil
}

// checkTemplate returns a not_found *coupon.Error when the template does not exist.
func checkTemplate(ctx context.Context, q queryer, template int64) error {
	var id int64
	err := q.QueryRowContext(ctx, `SELECT id FROM coupon_template WHERE id = ?`, template).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return coupon.NotFound("template", template)
	case err != nil:
		return fmt.Errorf("look up template %d: %w", template, err)
	}
	return nil
}

// GetPolicy is a template's policy: effective, defaults and override.
func GetPolicy(ctx context.Context, db *sql.DB, template int64) (PolicyView, error) {
	if err := checkTemplate(ctx, db, template); err != nil {
		return PolicyView{}, err
	}
	return view(ctx, db, template, false)
}

// view reads the defaults and the template's row into a PolicyView.
func view(ctx context.Context, q queryer, template int64, lock bool) (PolicyView, error) {
	defaults, err := readDefaults(ctx, q)
	if err != nil {
		return PolicyView{}, err
	}
	row, found, err := readPolicy(ctx, q, template, lock)
	if err != nil {
		return PolicyView{}, err
	}
	return makeView(template, defaults, row, found), nil
}

func makeView(template int64, defaults Policy, row policyRow, found bool) PolicyView {
	v := PolicyView{Template: template, Defaults: defaults, Effective: row.Override.Apply(defaults)}
	if found {
		at := row.UpdatedAt
		v.Override, v.Version, v.UpdatedBy, v.UpdatedAt = row.Override, row.Version, row.UpdatedBy, &at
	}
	return v
}

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
// nothing and returns the current view.
func SetPolicy(ctx context.Context, db *sql.DB, template int64, change Override, by, reason, source string) (PolicyView, error) {
	by, reason = strings.TrimSpace(by), strings.TrimSpace(reason)
	if err := checkChange(by, reason); err != nil {
		return PolicyView{}, err
	}
	if change.Empty() {
		return PolicyView{}, coupon.Invalid("", "the change sets no field: send at least one of mode, low, high, min_claims, max_share, reserve, cooldown_seconds, min_age_seconds")
	}
	var out PolicyView
	err := sqltx.Retry(ctx, db, maxAttempts, raced, func(tx *sql.Tx) error {
		if err := checkTemplate(ctx, tx, template); err != nil {
			return err
		}
		defaults, err := readDefaults(ctx, tx)
		if err != nil {
			return err
		}
		out, _, err = write(ctx, tx, template, defaults, change, by, reason, source)
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
func write(ctx context.Context, tx *sql.Tx, template int64, defaults Policy, change Override, by, reason, source string) (v PolicyView, changed bool, err error) {
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
	if err := audit(ctx, tx, template, version, ActionSet, before, after, by, reason, source); err != nil {
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

func audit(ctx context.Context, tx *sql.Tx, template, version int64, action string, before, after sql.NullString, by, reason, source string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO quota_policy_audit
		(template_id, version, action, before_json, after_json, changed_by, reason, source, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6))`, template, version, action, before, after, by, reason, source)
	if err != nil {
		return fmt.Errorf("write quota policy audit row: %w", err)
	}
	return nil
}

// ResetPolicy deletes the template's override, so that it follows the
// defaults again, with its audit row. A template without an override is
// left as it is and nothing is written.
func ResetPolicy(ctx context.Context, db *sql.DB, template int64, by, reason, source string) (PolicyView, error) {
	by, reason = strings.TrimSpace(by), strings.TrimSpace(reason)
	if err := checkChange(by, reason); err != nil {
		return PolicyView{}, err
	}
	var out PolicyView
	err := sqltx.Retry(ctx, db, maxAttempts, raced, func(tx *sql.Tx) error {
		if err := checkTemplate(ctx, tx, template); err != nil {
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
			by, reason, source); err != nil {
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
	if by = strings.TrimSpace(by); by == "" || len(by) > MaxChangedByLen {
		return false, coupon.Invalid("changed_by", "changed_by must be 1 to %d bytes: who publishes the defaults", MaxChangedByLen)
	}
	err = sqltx.Retry(ctx, db, maxAttempts, raced, func(tx *sql.Tx) error {
		// the defaults row sets every field, so it is checked over nothing but itself
		_, changed, err = write(ctx, tx, DefaultsTemplate, Defaults(), p.Full(), by,
			"defaults published from the cdc configuration", SourceConfig)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("publish quota policy defaults: %w", err)
	}
	return changed, nil
}

// Audit is the template's policy changes, newest first, at most limit
// (20 when limit <= 0, at most 1000). Template 0 is the defaults' history.
func Audit(ctx context.Context, db *sql.DB, template int64, limit int) ([]AuditEntry, error) {
	if limit <= 0 {
		limit = 20
	}
	limit = min(limit, 1000)
	if template != DefaultsTemplate {
		if err := checkTemplate(ctx, db, template); err != nil {
			return nil, err
		}
	}
	rows, err := db.QueryContext(ctx, `SELECT id, template_id, version, action, before_json, after_json, changed_by,
		reason, source, created_at FROM quota_policy_audit WHERE template_id = ? ORDER BY id DESC LIMIT ?`, template, limit)
	if err != nil {
		return nil, fmt.Errorf("read quota policy audit of template %d: %w", template, err)
	}
	defer rows.Close()
	out := []AuditEntry{}
	for rows.Next() {
		var e AuditEntry
		var before, after sql.NullString
		if err := rows.Scan(&e.ID, &e.Template, &e.Version, &e.Action, &before, &after, &e.ChangedBy,
			&e.Reason, &e.Source, &e.At); err != nil {
			return nil, fmt.Errorf("read quota policy audit of template %d: %w", template, err)
		}
		if e.Before, err = parseOverride(before); err == nil {
			e.After, err = parseOverride(after)
		}
		if err != nil {
			return nil, fmt.Errorf("read quota policy audit row %d: %w", e.ID, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read quota policy audit of template %d: %w", template, err)
	}
	return out, nil
}

func parseOverride(s sql.NullString) (*Override, error) {
	if !s.Valid {
		return nil, nil
	}
	var o Override
	if err := json.Unmarshal([]byte(s.String), &o); err != nil {
		return nil, err
	}
	return &o, nil
}

// Transfer is one quota_transfer_log row: a move of Amount claimable
// quota From one channel To another, applied (mode auto) or recommended
// (mode signal).
type Transfer struct {
	ID       int64     `json:"id"`
	Decision string    `json:"decision"`
	From     string    `json:"from"`
	To       string    `json:"to"`
	Amount   int64     `json:"amount"`
	Rule     string    `json:"rule"`
	Mode     string    `json:"mode"`
	At       time.Time `json:"at"`
}

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
	var out []ChannelView
	err := sqltx.Run(ctx, db, &sql.TxOptions{ReadOnly: true}, func(tx *sql.Tx) error {
		if err := checkTemplate(ctx, tx, template); err != nil {
			return err
		}
		var err error
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
		return nil, fmt.Errorf("read channels of template %d: %w", template, err)
	}
	return out, nil
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
// first writes of the same row both lock its gap, and one of them loses.
const maxAttempts = 10

func raced(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205 || me.Number == 1062)
}
