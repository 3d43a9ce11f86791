package inventory

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// Finding is one row of the finding table: what the cdc or the reconciler
// found, and where its lifecycle stands (api.Finding).
type Finding = api.Finding

// Seen is one occurrence of a finding, as the cdc or a reconcile pass
// records it.
type Seen struct {
	Source  string // api.FindingFromCDC or api.FindingFromReconcile
	Kind    string
	Subject string // the rows it names: with Source and Kind, its fingerprint
	Content string // what was found of them: another content opens it again
	Summary string
}

// Fingerprint is the finding's stable name: its source, kind and the rows
// it names, hashed.
func (s Seen) Fingerprint() string { return digest(s.Source, s.Kind, s.Subject) }

func digest(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:8])
}

// execer is a *sql.DB or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// RecordFindings records the occurrences, seen at at, in one statement: a
// new fingerprint is open; a known one is seen once more, and opens again
// when it was closed or its content changed (an acknowledged one found as
// it was stays acknowledged).
func RecordFindings(ctx context.Context, ex execer, at time.Time, seen []Seen) error {
	if len(seen) == 0 {
		return nil
	}
	var sb strings.Builder
	sb.WriteString(`INSERT INTO finding (fingerprint, source, kind, subject, content, summary, first_seen, last_seen) VALUES `)
	args := make([]any, 0, 8*len(seen))
	at = at.UTC()
	for i, s := range seen {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, s.Fingerprint(), s.Source, sqltx.Clip(s.Kind, 64), sqltx.Clip(s.Subject, 255), digest(s.Content),
			sqltx.Clip(s.Summary, 512), at, at)
	}
	// the state is judged on the row as it was (MySQL assigns left to right)
	sb.WriteString(` ON DUPLICATE KEY UPDATE
		state = IF(state = 'closed' OR content <> VALUES(content), 'open', state),
		content = VALUES(content), summary = VALUES(summary),
		last_seen = GREATEST(last_seen, VALUES(last_seen)), times_seen = times_seen + 1`)
	if _, err := ex.ExecContext(ctx, sb.String(), args...); err != nil {
		return fmt.Errorf("record findings: %w", err)
	}
	return nil
}

// FindingStates is the state of each of the fingerprints that has a row.
func FindingStates(ctx context.Context, q sqltx.Querier, fingerprints []string) (map[string]string, error) {
	if len(fingerprints) == 0 {
		return map[string]string{}, nil
	}
	args := make([]any, len(fingerprints))
	for i, f := range fingerprints {
		args[i] = f
	}
	out, err := sqltx.Map(ctx, q, `SELECT fingerprint, state FROM finding WHERE fingerprint IN (`+sqltx.Placeholders(len(args))+`)`, args,
		sqltx.KeyValue[string, string])
	if err != nil {
		return nil, fmt.Errorf("read findings' states: %w", err)
	}
	return out, nil
}

// FindingsQuery selects findings: by source, state and kind ("" for any)
// and by the template they name (0 for any: see FindingsOf), the last
// seen first, at most Limit (1 to 1000; 0: 100).
type FindingsQuery struct {
	Source, State, Kind string
	Template            int64
	Limit               int
}

const findingColumns = `fingerprint, source, kind, subject, summary, state, first_seen, last_seen, times_seen,
	COALESCE(acknowledged_by, ''), COALESCE(acknowledged_on_behalf_of, ''), acknowledged_at, COALESCE(acknowledged_reason, ''),
	COALESCE(closed_by, ''), COALESCE(closed_on_behalf_of, ''), closed_at, COALESCE(closed_reason, ''),
	COALESCE(reopened_by, ''), COALESCE(reopened_on_behalf_of, ''), reopened_at, COALESCE(reopened_reason, '')`

// ListFindings reads the findings q selects.
func ListFindings(ctx context.Context, db sqltx.Querier, q FindingsQuery) ([]Finding, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	where, args := []string{"1 = 1"}, []any{}
	if q.Source != "" {
		where, args = append(where, "source = ?"), append(args, q.Source)
	}
	if q.State != "" {
		where, args = append(where, "state = ?"), append(args, q.State)
	}
	if q.Kind != "" {
		where, args = append(where, "kind = ?"), append(args, q.Kind)
	}
	out := []Finding{}
	err := sqltx.EachRow(ctx, db, `SELECT `+findingColumns+` FROM finding WHERE `+strings.Join(where, " AND ")+
		` ORDER BY last_seen DESC, fingerprint LIMIT ?`, append(args, min(limit, 1000)), func(rows *sql.Rows) error {
		f, err := scanFinding(rows)
		out = append(out, f)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list findings: %w", err)
	}
	return out, nil
}

func scanFinding(row interface{ Scan(...any) error }) (Finding, error) {
	var f Finding
	var acked, closed, reopened sql.NullTime
	err := row.Scan(&f.Fingerprint, &f.Source, &f.Kind, &f.Subject, &f.Summary, &f.State, &f.FirstSeen, &f.LastSeen, &f.TimesSeen,
		&f.AcknowledgedBy, &f.AcknowledgedOnBehalfOf, &acked, &f.AcknowledgedReason,
		&f.ClosedBy, &f.ClosedOnBehalfOf, &closed, &f.ClosedReason,
		&f.ReopenedBy, &f.ReopenedOnBehalfOf, &reopened, &f.ReopenedReason)
	f.AcknowledgedAt, f.ClosedAt, f.ReopenedAt = timePtr(acked), timePtr(closed), timePtr(reopened)
	return f, err
}

// GetFinding reads one finding; ErrNoFinding when there is none.
func GetFinding(ctx context.Context, db *sql.DB, fingerprint string) (Finding, error) {
	f, err := scanFinding(db.QueryRowContext(ctx, `SELECT `+findingColumns+` FROM finding WHERE fingerprint = ?`, fingerprint))
	if errors.Is(err, sql.ErrNoRows) {
		return f, fmt.Errorf("finding %q: %w", fingerprint, ErrNoFinding)
	}
	return f, err
}

var (
	// ErrNoFinding means no finding has that fingerprint.
	ErrNoFinding = errors.New("no finding with that fingerprint")
	// ErrFindingState means the finding is not in a state the action
	// applies to (acknowledge: open; close: open or acknowledged).
	ErrFindingState = errors.New("the finding is not in a state this applies to")
)

// FindingInputError is an operator or a reason missing or too long: what
// AckFinding and CloseFinding require.
type FindingInputError struct{ Field, Message string }

func (e *FindingInputError) Error() string { return e.Message }

// AckFinding acknowledges an open finding: who, why and when are kept.
// Found again as it is, it stays acknowledged. operator and reason are
// checked as given; identity is the name of the token that sent the
// request ("" for none): with one, the finding records it, and operator,
// when another name, as the one it acts for (coupon.Acting).
func AckFinding(ctx context.Context, db *sql.DB, fingerprint, operator, reason, identity string) (Finding, error) {
	return moveFinding(ctx, db, fingerprint, operator, reason, identity, api.FindingAcknowledged, "acknowledged", "state = 'open'")
}

// CloseFinding closes an open or acknowledged finding: who, why and when
// are kept, as AckFinding. Found again, it opens again.
func CloseFinding(ctx context.Context, db *sql.DB, fingerprint, operator, reason, identity string) (Finding, error) {
	return moveFinding(ctx, db, fingerprint, operator, reason, identity, api.FindingClosed, "closed", "state IN ('open', 'acknowledged')")
}

// ReopenFinding opens an acknowledged or closed finding again: who, why
// and when are kept, as AckFinding (the acknowledgement and closing are
// kept too).
func ReopenFinding(ctx context.Context, db *sql.DB, fingerprint, operator, reason, identity string) (Finding, error) {
	return moveFinding(ctx, db, fingerprint, operator, reason, identity, api.FindingOpen, "reopened", "state IN ('acknowledged', 'closed')")
}

// moveFinding moves a finding in a state cond allows to state, recording
// operator (and whom it acts for), reason and the time in the columns of
// prefix.
func moveFinding(ctx context.Context, db *sql.DB, fingerprint, operator, reason, identity, state, prefix, cond string) (Finding, error) {
	operator, reason = strings.TrimSpace(operator), strings.TrimSpace(reason)
	switch {
	case operator == "":
		return Finding{}, &FindingInputError{"operator", "an operator is required: who acts on the finding"}
	case len(operator) > 64:
		return Finding{}, &FindingInputError{"operator", fmt.Sprintf("the operator must be at most 64 bytes, got %d", len(operator))}
	case reason == "":
		return Finding{}, &FindingInputError{"reason", "a reason is required: say what was checked or why"}
	}
	by, behalf := coupon.Acting(operator, identity)
	res, err := db.ExecContext(ctx, `UPDATE finding SET state = ?, `+prefix+`_by = ?, `+prefix+`_on_behalf_of = ?, `+prefix+`_at = ?, `+prefix+`_reason = ?
		WHERE fingerprint = ? AND `+cond, state, by, sql.NullString{String: behalf, Valid: behalf != ""}, time.Now().UTC(), sqltx.Clip(reason, 512), fingerprint)
	if err != nil {
		return Finding{}, fmt.Errorf("finding %q: %w", fingerprint, err)
	}
	f, err := GetFinding(ctx, db, fingerprint)
	if err != nil {
		return f, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return f, fmt.Errorf("finding %q: %w", fingerprint, err)
	} else if n == 0 {
		return f, fmt.Errorf("finding %q is %s: %w", fingerprint, f.State, ErrFindingState)
	}
	return f, nil
}

func timePtr(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	return &t.Time
}
