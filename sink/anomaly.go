package sink

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory"
)

// Anomaly is one thing seen in the binlog that a correct coupon system
// does not do. The counters still mirror the table.
type Anomaly struct {
	Kind     string // one of inventory.AnomalyKinds
	Coupon   int64
	Template int64
	Channel  string
	From, To coupon.Status
	// FromCode and ToCode are From and To as the source stored them
	// (canal.Transition's codes): a legacy shop's 0 → 1 is couponlink's
	// AVAILABLE → USED, and a row shows both. Invalid when not known;
	// insertAnomalies fills a state the mapping gives one code.
	FromCode, ToCode sql.NullInt64
	Order            string
	Detail           string
}

// anomalyAt is an anomaly of the coupon change t (its Kind unset): its
// coupon, place, states, the shop's codes and order.
func anomalyAt(t *canal.Transition) Anomaly {
	return Anomaly{Coupon: t.Coupon, Template: t.Template, Channel: t.Channel, From: t.From, To: t.To,
		FromCode: t.FromCode, ToCode: t.ToCode, Order: t.Order}
}

// judgeTransition says whether one decoded change is an anomaly.
func judgeTransition(t *canal.Transition) (Anomaly, bool) {
	a := anomalyAt(t)
	switch {
	case t.Undecodable:
		return a, false // entering or leaving the counted set: the undecodable_row anomaly says why
	case t.From != coupon.None && t.To != coupon.None && (t.Template != t.PrevTemplate || t.Channel != t.PrevChannel):
		// a move is illegal whatever the status does
		a.Kind = inventory.AnomalyIllegalTransition
		a.Detail = fmt.Sprintf("coupon %d moved from template %d channel %q to template %d channel %q (%s)", t.Coupon,
			t.PrevTemplate, t.PrevChannel, t.Template, t.Channel, t.Change())
		return a, true
	case t.From == t.To:
		return a, false
	case t.To == coupon.None:
		a.Kind, a.Template, a.Channel = inventory.AnomalyDeletedCoupon, t.PrevTemplate, t.PrevChannel
		a.Detail = fmt.Sprintf("coupon %d (%s) was deleted; its ledger rows lose their coupon", t.Coupon, canal.StateText(t.From.String(), t.FromCode))
		return a, true
	case !coupon.Legal(t.From, t.To):
		a.Kind = inventory.AnomalyIllegalTransition
		a.Detail = fmt.Sprintf("coupon %d went %s, which is not a legal transition", t.Coupon, t.Change())
		return a, true
	}
	return a, false
}

// illegalTransitions is the check of each coupon change by itself
// (judgeTransition): illegal_transition, deleted_coupon.
type illegalTransitions struct{ noCheck }

func (illegalTransitions) judge(_ context.Context, b *batch) ([]Anomaly, error) {
	var out []Anomaly
	for i := range b.Transitions {
		if a, bad := judgeTransition(&b.Transitions[i]); bad {
			out = append(out, a)
		}
	}
	return out, nil
}

// undecodableRows is the undecodable_row check.
type undecodableRows struct{ noCheck }

func (undecodableRows) judge(_ context.Context, b *batch) ([]Anomaly, error) {
	return undecodable(b.Batch), nil
}

// undecodable is an undecodable_row anomaly per row the mapping could not
// decode.
func undecodable(b *canal.Batch) []Anomaly {
	out := make([]Anomaly, 0, len(b.Undecodable))
	for _, u := range b.Undecodable {
		out = append(out, Anomaly{Kind: inventory.AnomalyUndecodableRow, Detail: u.String()})
	}
	return out
}

func hasOrder(orders []string, order string) bool {
	for _, o := range orders {
		if order == "" || o == "" || o == order {
			return true
		}
	}
	return false
}

// insertAnomalies records anomalies with the batch's position, and the
// findings they are (one statement each). Each row
// names its states twice: couponlink's (from_status/to_status as numbers,
// from_state/to_state as names) and the source's codes (from_code,
// to_code).
func (s *Sink) insertAnomalies(ctx context.Context, tx *sql.Tx, as []Anomaly, b *canal.Batch) error {
	if len(as) == 0 {
		return nil
	}
	var sb strings.Builder
	args := make([]any, 0, 16*len(as))
	sb.WriteString(`INSERT INTO cdc_anomaly (kind, user_coupon_id, template_id, channel, from_status, to_status, from_state, to_state,
		from_code, to_code, order_id, detail, binlog_file, binlog_pos, gtid_set, event_time) VALUES `)
	var at sql.NullTime
	if !b.EventTime.IsZero() {
		at = sql.NullTime{Time: b.EventTime.UTC(), Valid: true}
	}
	for i, a := range as {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		detail := a.Detail
		if len(detail) > 512 {
			detail = detail[:512]
		}
		args = append(args, a.Kind, nullInt(a.Coupon), nullInt(a.Template), nullStr(a.Channel), nullStatus(a.From), nullStatus(a.To),
			stateName(a.From), stateName(a.To), s.storedCode(a.From, a.FromCode), s.storedCode(a.To, a.ToCode),
			nullStr(a.Order), detail, b.End.File, b.End.Pos, b.End.GTID, at)
	}
	if _, err := tx.ExecContext(ctx, sb.String(), args...); err != nil {
		return fmt.Errorf("record anomalies: %w", err)
	}
	// and the findings they are, in the same transaction (findings.go)
	return inventory.RecordFindings(ctx, tx, time.Now(), s.anomalyFindings(as))
}

// storedCode is the code the source stored for st: code when known, else
// the state's only code in the mapping (a decoded image of that state can
// have held no other), else NULL (no state, or a state of several codes).
// It fills anomalies built before their codes were kept (a pending check
// read back from cdc_pending_redemption).
func (s *Sink) storedCode(st coupon.Status, code sql.NullInt64) sql.NullInt64 {
	if code.Valid || st == coupon.None {
		return code
	}
	if codes := s.cfg.Mapping.Codes(st); len(codes) == 1 {
		return sql.NullInt64{Int64: codes[0], Valid: true}
	}
	return sql.NullInt64{}
}

// change is the anomaly's states with the source's codes, as its row
// has them: "AVAILABLE(0) -> USED(1)"; "" for an anomaly of no coupon
// transition.
func (s *Sink) change(a Anomaly) string {
	from, to := stateName(a.From), stateName(a.To)
	fromCode, toCode := s.storedCode(a.From, a.FromCode), s.storedCode(a.To, a.ToCode)
	if !from.Valid && !to.Valid && !fromCode.Valid && !toCode.Valid {
		return ""
	}
	return canal.StateText(from.String, fromCode) + " -> " + canal.StateText(to.String, toCode)
}

// stateName is st's name, NULL for none.
func stateName(st coupon.Status) sql.NullString {
	if st == coupon.None {
		return sql.NullString{}
	}
	return sql.NullString{String: st.String(), Valid: true}
}

func nullInt(v int64) sql.NullInt64   { return sql.NullInt64{Int64: v, Valid: v != 0} }
func nullStr(v string) sql.NullString { return sql.NullString{String: v, Valid: v != ""} }
func nullStatus(s coupon.Status) sql.NullInt16 {
	return sql.NullInt16{Int16: int16(s), Valid: s != coupon.None}
}
