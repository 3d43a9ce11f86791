package quota

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
)

// Legacy campaigns (a shop attached through a mapping, whose tables
// couponlink never writes) have policies too, in signal mode only: the
// rule runs on the shop's channels as the mapping shows them and the cdc
// sends its recommendation (a quota_transfer_log row of mode signal and a
// quota.recommendation event); moving quota would be a write to the shop's
// tables, so mode auto is refused.
//
// A legacy policy is a quota_policy row keyed by the shop's template id,
// in couponlink's own database (with several sources: the judge's, whose
// cdc decides), beside the defaults row it inherits from; a defaults mode
// of auto runs as signal for a legacy campaign (ForLegacy). The shop's
// ids and couponlink's own templates share the table: a legacy template
// whose id is one of couponlink's own templates in that database is
// refused.
//
// The rule's inputs come through the mapping: each channel's claims and
// uses are the cdc's counters (inventory_counter, summed over the sources),
// its quota and claim guard the shop's per-channel budget (the mapping's
// channel_quota) as the cdc last read it. Without a per-channel budget the
// quotas are unknown and nothing is recommended (Input.QuotaUnknown); a
// campaign's creation time is not mapped, so its age is unknown and
// min_age is not applied (Input.AgeUnknown).

// ForLegacy is p as it runs for a legacy campaign: mode auto, which only
// the defaults can give it, runs as signal.
func ForLegacy(p Policy) Policy {
	if p.Mode == ModeAuto {
		p.Mode = ModeSignal
	}
	return p
}

// refuseAuto is the answer to a legacy policy of mode auto.
func refuseAuto(o Override) error {
	if o.Mode == nil || *o.Mode != ModeAuto {
		return nil
	}
	return &coupon.Error{Code: api.CodeLegacyPolicyRefused, Field: "mode", Message: "mode auto is refused for a legacy campaign: " +
		"couponlink never writes the shop's tables, so it cannot move quota between the shop's channels. Use signal " +
		"(the recommendation is sent as a quota.recommendation event, for the shop to apply) or off"}
}

// notOwn refuses a legacy template id that is one of couponlink's own
// templates in the database: the two would share one policy row.
func notOwn(ctx context.Context, q queryer, template int64) error {
	var id int64
	err := q.QueryRowContext(ctx, `SELECT id FROM coupon_template WHERE id = ?`, template).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("look up template %d: %w", template, err)
	}
	return &coupon.Error{Code: api.CodeLegacyPolicyRefused, Field: "id", Message: fmt.Sprintf("template %d is also one of couponlink's own "+
		"campaigns in this database, and the two would share one policy: set its policy at /v1/templates/%d/quota-policy, or keep "+
		"couponlink's own campaigns in another database than the legacy shop's", template, template)}
}

// legacyView is v with the effective policy as it runs for a legacy campaign.
func legacyView(v PolicyView, err error) (PolicyView, error) {
	v.Effective = ForLegacy(v.Effective)
	return v, err
}

// GetLegacyPolicy is a legacy template's policy (the caller checked that
// the shop has the template).
func GetLegacyPolicy(ctx context.Context, db *sql.DB, template int64) (PolicyView, error) {
	if err := notOwn(ctx, db, template); err != nil {
		return PolicyView{}, err
	}
	return legacyView(view(ctx, db, template, false))
}

// LegacyAudit is Audit for a legacy template (the caller checked that the
// shop has it).
func LegacyAudit(ctx context.Context, db *sql.DB, template int64, limit int) ([]AuditEntry, error) {
	if err := notOwn(ctx, db, template); err != nil {
		return nil, err
	}
	return readAudit(ctx, db, template, limit)
}

// SetLegacyPolicy is SetPolicy for a legacy template (the caller checked
// that the shop has it): mode auto is refused (api.CodeLegacyPolicyRefused).
func SetLegacyPolicy(ctx context.Context, db *sql.DB, template int64, change Override, by, reason, source, identity string) (PolicyView, error) {
	if err := refuseAuto(change); err != nil {
		return PolicyView{}, err
	}
	return legacyView(setPolicy(ctx, db, template, change, author{by, reason, source, identity}, notOwn))
}

// ResetLegacyPolicy is ResetPolicy for a legacy template (the caller
// checked that the shop has it): it follows the defaults again, as they
// run for a legacy campaign.
func ResetLegacyPolicy(ctx context.Context, db *sql.DB, template int64, by, reason, source, identity string) (PolicyView, error) {
	return legacyView(resetPolicy(ctx, db, template, author{by, reason, source, identity}, notOwn))
}

// LegacyChannels are a legacy template's channels as the rule sees them,
// read through the mapping by the caller.
type LegacyChannels struct {
	Channels     []Channel
	QuotaUnknown bool // the mapping names no per-channel budget
}

// PreviewLegacy is Preview for a legacy template: the policy in force with
// change over it (mode auto refused), the channels as given, the last
// recommendation, then Decide, as the cdc's legacy pass decides.
func PreviewLegacy(ctx context.Context, db *sql.DB, template int64, change Override, chans LegacyChannels, now time.Time) (Input, Decision, error) {
	if err := refuseAuto(change); err != nil {
		return Input{}, Decision{}, err
	}
	return preview(ctx, db, template, change, "legacy template", notOwn, func(tx *sql.Tx, p Policy) (Input, error) {
		return legacyInput(ctx, tx, template, ForLegacy(p), chans, now)
	})
}

// legacyInput is the rule's input of a legacy template: its channels as
// given, the last decision of p's mode, an unknown age.
func legacyInput(ctx context.Context, q queryer, template int64, p Policy, chans LegacyChannels, now time.Time) (Input, error) {
	last, err := lastDecision(ctx, q, template, p.Mode)
	if err != nil {
		return Input{}, err
	}
	return Input{Template: template, Policy: p, Channels: chans.Channels, LastMove: last, Now: now,
		QuotaUnknown: chans.QuotaUnknown, AgeUnknown: true}, nil
}
