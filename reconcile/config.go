// Package reconcile proves, on a schedule and on demand, that the derived
// state still equals the truth in MySQL: the cdc's counters, the cached
// counts of coupon_template, channel_quota.claimed and the Redis stock keys
// (couponlink's own, or a legacy front end's). It compares at a known binlog
// position, fixes what is safe (Redis by compare-and-set on a quiet key,
// counters with a correction record), leaves the rest for a person, and
// records every pass in reconcile_task.
package reconcile

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/defaults"
	"github.com/couponlink/couponlink/inventory"
)

// Config wires a Reconciler.
type Config struct {
	DB         *sql.DB        // couponlink's database
	Mapping    *canal.Mapping // nil: the reference schema
	Checkpoint string         // the cdc's checkpoint name; default "default"
	// Binlog is the binlog connection (canal.ConfigFromDSN). When set, a
	// pass compares every counter row exactly at the cdc's checkpoint: it
	// replays the binlog between its snapshot and the checkpoint. When
	// empty, rows the cdc moved past the snapshot wait for a later pass.
	Binlog canal.Config

	Redis     redis.UniversalClient // nil: Redis is not compared
	RedisMode inventory.RedisMode   // owner (couponlink's keys; default for the reference schema) or corrector (the mapping's legacy keys)
	Keys      inventory.Keys        // couponlink's key names; default prefix "couponlink:"

	// QuietWindow: a Redis key is corrected only when neither it nor the
	// truth moved for this long. Default 5 s.
	QuietWindow time.Duration
	// ClaimedQuiet: a member of a legacy front end's claimed set
	// (redis.claimed_users) without the per-user limit in MySQL is removed
	// only when it is still so this long after it was found, and the set
	// did not change meanwhile. Longer than a claim takes from the front
	// end's SADD to its order's commit. Default 2 min.
	ClaimedQuiet time.Duration
	// CatchUpWait bounds the binlog replay to the cdc's checkpoint (with
	// Binlog; without, the wait for the checkpoint to reach the snapshot)
	// and the wait for another pass on the same database. Default 30 s.
	CatchUpWait time.Duration
	// A counter difference above both thresholds (absolute, and relative to
	// the truth) is left for a person. Defaults 100 and 0.05.
	AbsThreshold int64
	RelThreshold float64
	// AutoFix: correct what is safe. Default true; false only reports.
	AutoFix *bool
	Actor   string // who the corrections are recorded as; default "reconciler"
	// Events writes a reconcile.needs_review event to the webhook outbox
	// in the transaction that records a pass needing a person (the
	// webhook and the stream sinks deliver it).
	Events bool

	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Now        func() time.Time
}

func (c *Config) defaults() error {
	if c.DB == nil {
		return errors.New("reconcile: Config.DB is nil")
	}
	reference := c.Mapping == nil
	if reference {
		c.Mapping = canal.DefaultMapping()
	}
	if c.Checkpoint == "" {
		c.Checkpoint = "default"
	}
	if err := c.RedisMode.Validate(); err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	if c.RedisMode == "" {
		c.RedisMode = inventory.DefaultRedisMode(c.Mapping)
	}
	if c.Keys.Prefix == "" {
		c.Keys.Prefix = "couponlink:"
	}
	if c.QuietWindow <= 0 {
		c.QuietWindow = 5 * time.Second
	}
	if c.ClaimedQuiet <= 0 {
		c.ClaimedQuiet = 2 * time.Minute
	}
	if c.CatchUpWait <= 0 {
		c.CatchUpWait = 30 * time.Second
	}
	if c.AbsThreshold <= 0 {
		c.AbsThreshold = 100
	}
	if c.RelThreshold <= 0 {
		c.RelThreshold = 0.05
	}
	if c.AutoFix == nil {
		t := true
		c.AutoFix = &t
	}
	if c.Actor == "" {
		c.Actor = "reconciler"
	}
	defaults.LogMetricsClock(&c.Logger, &c.Registerer, &c.Now)
	return nil
}
