package coupon

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// Expiry policies of a template.
const (
	PolicyFreeze  = "freeze"  // an expired coupon's slot stays consumed
	PolicyRelease = "release" // it goes back to its channel after the cooldown
)

// DefaultReleaseCooldown is how long an expired slot waits before release.
const DefaultReleaseCooldown = 72 * time.Hour

// Limits on input sizes, matching the columns.
const (
	MaxNameLen    = 200
	MaxChannelLen = 64
	MaxIDLen      = 64  // user_id, order_id, operator
	MaxRequestLen = 128 // request_id
	MaxReasonLen  = 255
	MaxChannels   = 1000
	// MaxSeconds bounds every duration in seconds: 100 years (see api).
	MaxSeconds = api.MaxSeconds
	// MaxPerUserLimit is the largest per_user_limit (an INT column).
	MaxPerUserLimit = 1<<31 - 1
	// MaxQuota bounds total_quota, hence every channel's quota and every sum
	// of them: 10^12 (see api).
	MaxQuota = api.MaxQuota
)

// Seconds is n seconds as a time.Duration, clamped to 0..MaxSeconds: a
// value stored before these bounds, or written by hand, never wraps around.
func Seconds(n int64) time.Duration {
	return time.Duration(min(max(n, 0), MaxSeconds)) * time.Second
}

// NewTemplate is a campaign to create.
type NewTemplate struct {
	Name                   string
	TotalQuota             int64
	Channels               map[string]int64
	ValidSeconds           int64
	PerUserLimit           int64 // 0 means the default, 1
	ExpiryPolicy           string
	ReleaseCooldownSeconds *int64 // nil means the default, 72 h
}

// Template is a stored campaign.
type Template = api.Template

// Validate checks a new template and fills in its defaults.
func (t *NewTemplate) Validate() error {
	t.Name = strings.TrimSpace(t.Name)
	switch {
	case t.Name == "":
		return Invalid("name", "name is required")
	case utf8.RuneCountInString(t.Name) > MaxNameLen:
		return Invalid("name", "name is longer than %d characters", MaxNameLen)
	case t.TotalQuota <= 0:
		return Invalid("total_quota", "total_quota must be a positive number, got %d", t.TotalQuota)
	case t.TotalQuota > MaxQuota:
		return Invalid("total_quota", "total_quota must be at most %d, got %d", int64(MaxQuota), t.TotalQuota)
	case len(t.Channels) == 0:
		return Invalid("channels", `channels is required: the quota of each channel, e.g. {"app": 600, "sms": 400}`)
	case len(t.Channels) > MaxChannels:
		return Invalid("channels", "at most %d channels, got %d", MaxChannels, len(t.Channels))
	case t.ValidSeconds <= 0:
		return Invalid("valid_seconds", "valid_seconds must be a positive number of seconds, got %d", t.ValidSeconds)
	case t.ValidSeconds > MaxSeconds:
		return Invalid("valid_seconds", "valid_seconds must be at most %d (100 years), got %d", MaxSeconds, t.ValidSeconds)
	case t.PerUserLimit < 0:
		return Invalid("per_user_limit", "per_user_limit must be at least 1, got %d", t.PerUserLimit)
	case t.PerUserLimit > MaxPerUserLimit:
		return Invalid("per_user_limit", "per_user_limit must be at most %d, got %d", MaxPerUserLimit, t.PerUserLimit)
	}
	if err := CheckText(false, "name", t.Name); err != nil {
		return err
	}
	var sum int64
	for name, q := range t.Channels {
		if err := validChannel(name, "channels"); err != nil {
			return err
		}
		if q < 0 {
			return Invalid("channels", "channel %q has a negative quota %d", name, q)
		}
		// sum <= TotalQuota here, so the subtraction cannot overflow (the sum could)
		if q > t.TotalQuota-sum {
			return Invalid("channels", "the channel quotas add up to more than total_quota %d", t.TotalQuota)
		}
		sum += q
	}
	if sum != t.TotalQuota {
		return Invalid("channels", "the channel quotas add up to %d but total_quota is %d", sum, t.TotalQuota)
	}
	if t.PerUserLimit == 0 {
		t.PerUserLimit = 1
	}
	switch t.ExpiryPolicy {
	case "":
		t.ExpiryPolicy = PolicyFreeze
	case PolicyFreeze, PolicyRelease:
	default:
		return Invalid("expiry_policy", `expiry_policy must be "freeze" or "release", got %q`, t.ExpiryPolicy)
	}
	if t.ReleaseCooldownSeconds == nil {
		d := int64(DefaultReleaseCooldown / time.Second)
		t.ReleaseCooldownSeconds = &d
	} else if *t.ReleaseCooldownSeconds < 0 || *t.ReleaseCooldownSeconds > MaxSeconds {
		return Invalid("release_cooldown_seconds", "release_cooldown_seconds must be between 0 and %d (100 years), got %d",
			MaxSeconds, *t.ReleaseCooldownSeconds)
	}
	return nil
}

func validChannel(name, field string) error {
	switch {
	case name == "":
		return Invalid(field, "a channel name is empty")
	case len(name) > MaxChannelLen:
		return Invalid(field, "channel %q is longer than %d bytes", name, MaxChannelLen)
	case strings.TrimSpace(name) != name:
		return Invalid(field, "channel %q has leading or trailing spaces", name)
	}
	return CheckText(false, field, name)
}

// CreateTemplate stores a campaign and its channel buckets in one transaction.
func (s *Store) CreateTemplate(ctx context.Context, nt NewTemplate) (Template, error) {
	if err := nt.Validate(); err != nil {
		return Template{}, err
	}
	t := Template{Name: nt.Name, TotalQuota: nt.TotalQuota, Channels: nt.Channels, ValidSeconds: nt.ValidSeconds,
		PerUserLimit: nt.PerUserLimit, ExpiryPolicy: nt.ExpiryPolicy, ReleaseCooldownSeconds: *nt.ReleaseCooldownSeconds,
		CreatedAt: s.clock()}
	names := make([]string, 0, len(nt.Channels))
	for name := range nt.Channels {
		names = append(names, name)
	}
	sort.Strings(names)
	err := sqltx.Run(ctx, s.db, nil, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO coupon_template
			(name, total_quota, valid_seconds, per_user_limit, expiry_policy, release_cooldown_seconds, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`,
			t.Name, t.TotalQuota, t.ValidSeconds, t.PerUserLimit, t.ExpiryPolicy, t.ReleaseCooldownSeconds, t.CreatedAt)
		if err != nil {
			return fmt.Errorf("insert template: %w", err)
		}
		if t.ID, err = res.LastInsertId(); err != nil {
			return err
		}
		args := make([]any, 0, 3*len(names))
		for _, name := range names {
			args = append(args, t.ID, name, nt.Channels[name])
		}
		if _, err := insertRows(ctx, tx, `channel_quota (template_id, channel, quota)`, len(names), args, ""); err != nil {
			return fmt.Errorf("insert channel quotas: %w", err)
		}
		return nil
	})
	return t, err
}

// templateRules is what the claim path needs of a template.
type templateRules struct {
	ValidSeconds int64
	PerUserLimit int64
}

// templateRules reads them once per template: they never change after
// the template is created.
func (s *Store) templateRules(ctx context.Context, id int64) (templateRules, error) {
	if r, ok := s.rules.Load(id); ok {
		return r.(templateRules), nil
	}
	var r templateRules
	err := s.db.QueryRowContext(ctx, `SELECT valid_seconds, per_user_limit FROM coupon_template WHERE id = ?`, id).
		Scan(&r.ValidSeconds, &r.PerUserLimit)
	if errors.Is(err, sql.ErrNoRows) {
		return r, NotFound("template", id)
	}
	if err != nil {
		return r, fmt.Errorf("read template %d: %w", id, err)
	}
	s.rules.Store(id, r)
	return r, nil
}

// GetTemplate reads a stored campaign with its channel quotas.
func (s *Store) GetTemplate(ctx context.Context, id int64) (Template, error) {
	t := Template{ID: id, Channels: map[string]int64{}}
	err := s.db.QueryRowContext(ctx, `SELECT name, total_quota, valid_seconds, per_user_limit, expiry_policy,
		release_cooldown_seconds, created_at FROM coupon_template WHERE id = ?`, id).
		Scan(&t.Name, &t.TotalQuota, &t.ValidSeconds, &t.PerUserLimit, &t.ExpiryPolicy, &t.ReleaseCooldownSeconds, &t.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return t, NotFound("template", id)
	}
	if err != nil {
		return t, fmt.Errorf("read template %d: %w", id, err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT channel, quota FROM channel_quota WHERE template_id = ?`, id)
	if err != nil {
		return t, fmt.Errorf("read channel quotas of template %d: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var q int64
		if err := rows.Scan(&name, &q); err != nil {
			return t, err
		}
		t.Channels[name] = q
	}
	return t, rows.Err()
}
