package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/defaults"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/quota"
)

// Mode says whose tables the cdc reads, and so what it writes besides its
// own tables by default.
type Mode string

const (
	// ModeReference reads couponlink's own schema (canal.DefaultMapping),
	// written by couponlink api: the cdc also gives slots back, rebalances
	// channel quota and keeps coupon_template's cached counts.
	ModeReference Mode = "reference"
	// ModeLegacy reads a legacy application's tables, named by a mapping
	// file: the cdc derives its counters and writes nothing of the
	// application's unless the Config turns it on.
	ModeLegacy Mode = "legacy"
)

// Config wires a Sink.
type Config struct {
	DB *sql.DB // couponlink's database: counters, checkpoint, anomalies
	// Mode is reference or legacy; default: the mapping's (reference
	// without one, see canal.Mapping.Reference).
	Mode    Mode
	Mapping *canal.Mapping // the source tables; default canal.DefaultMapping()
	Name    string         // checkpoint name; default "default"
	Leader  string         // who runs (for status); default host:pid
	// LeaderTimeout bounds how long the leader lock outlives a leader the
	// server cannot hear from (host gone, network partition): the lock's
	// session has this wait_timeout. Default DefaultLeaderTimeout (10 s),
	// at least 2 s. A leader whose process dies frees it at once.
	LeaderTimeout time.Duration
	// BinlogDB is the server whose binlog the tailer reads, when it is not
	// DB's: a replica of DB's server (log_slave_updates, same GTID domain).
	// The snapshot of a bootstrap, the resume point and the stall watch
	// read it, so that the checkpoint is a position of its binlog; the
	// counters, checkpoint and lock stay on DB. Default: DB.
	BinlogDB *sql.DB

	Redis     redis.UniversalClient // nil: no Redis
	RedisMode inventory.RedisMode   // owner (default when the mapping has channel quotas), corrector, off
	Keys      inventory.Keys        // Redis key names; default prefix "couponlink:"

	// Strict stops the cdc (ErrUndecodableRow, which the daemon does not
	// retry) at a row the mapping cannot decode, instead of recording an
	// undecodable_row anomaly and going on.
	Strict bool

	// RedemptionGrace is how long a coupon may be USED before its
	// redemption row must exist. Default 30 s.
	RedemptionGrace time.Duration
	MaxPending      int // bound of the coupons awaiting that check; default 100,000
	// RedemptionUnique says the redemption table has a unique key on
	// (order, coupon), so duplicates cannot happen and are not looked for.
	// Default: true in reference mode.
	RedemptionUnique bool
	// CacheTemplateCounts refreshes coupon_template's cached counts. Default:
	// true in reference mode (a legacy template table is its application's).
	CacheTemplateCounts bool
	// Releases gives slots back to their channel buckets (void, recycle,
	// expiry under the release policy). Default: true in reference mode (a
	// legacy schema has no buckets couponlink may write).
	Releases     bool
	ReleaseEvery time.Duration // how often due expiry releases are looked for; default 10 s
	// Rebalance runs the channel-quota rule (package quota) on a timer.
	// Default: true in reference mode. A legacy shop with per-channel
	// budgets gets the rule in signal mode without it, by the cdc that
	// decides (legacySignal, rebalance.go), every RebalanceEvery.
	Rebalance      bool
	RebalanceEvery time.Duration // default 30 s
	// QuotaDefaults is the policy of templates without an override; the
	// cdc publishes it (quota_policy row 0) at start. Zero: quota.Defaults().
	QuotaDefaults quota.Policy
	// Webhooks writes events (sold out, released, transfers, anomalies) to
	// the webhook outbox, in the transaction of the change they report.
	Webhooks bool
	// ChannelLow is the share of a bucket's quota at or below which its
	// claimable slots are "low": the change that brings them there (from
	// above, not to 0, which is channel.sold_out) writes a channel.low
	// event. 0: no channel.low events.
	ChannelLow        float64
	MaxLabelTemplates int // templates exported in couponlink_inventory; default 200
	// Peers are the mapping's other sources, when it spans several
	// servers: the redemption-evidence checks look there too (peers.go).
	Peers []Peer
	// Bootstrapped, when set, is called after each bootstrap has
	// committed, with the position it counted at (couponlink cdc starts
	// its audit at attach there); it must not block.
	Bootstrapped func(ctx context.Context, pos canal.Position)
	// ClaimedSets keeps the "already claimed" sets in owner mode
	// (claimed.go): after each batch, the coupons of the users it touched
	// are counted again from the table, a read that costs the catch-up
	// most of its speed (docs/cdc.md), so it is asked for, not the default.
	ClaimedSets bool

	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Now        func() time.Time

	// inBatchTx, set by tests only (export_test.go), runs in each batch
	// transaction just before its events are written (step 10).
	inBatchTx func(ctx context.Context, tx *sql.Tx) error
	// countTruth, set by tests only, counts the coupons of templates in
	// place of the coupon table (overissue.go).
	countTruth func(ctx context.Context, templates []int64) (map[inventory.Pair]*inventory.Counts, error)
}

// check validates cfg and fills in its defaults.
func (cfg *Config) check() error {
	if cfg.DB == nil {
		return errors.New("sink: Config.DB is nil")
	}
	if err := cfg.checkMode(); err != nil {
		return err
	}
	if cfg.Name == "" {
		cfg.Name = "default"
	}
	if cfg.BinlogDB == nil {
		cfg.BinlogDB = cfg.DB
	}
	cfg.LeaderTimeout = leaderTimeout(cfg.LeaderTimeout)
	if cfg.Leader == "" {
		cfg.Leader = LeaderName()
	}
	if err := cfg.RedisMode.Validate(); err != nil {
		return fmt.Errorf("sink: %w", err)
	}
	if cfg.RedisMode == "" {
		cfg.RedisMode = inventory.DefaultRedisMode(cfg.Mapping)
	}
	if cfg.RedisMode == inventory.RedisOwner && cfg.Mapping.ChannelQuota == nil {
		return errors.New("sink: Redis owner mode needs channel quotas in the mapping; use corrector mode for a legacy schema")
	}
	if cfg.Keys.Prefix == "" {
		cfg.Keys.Prefix = "couponlink:"
	}
	if cfg.RedemptionGrace <= 0 {
		cfg.RedemptionGrace = 30 * time.Second
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 100_000
	}
	if cfg.Mode == ModeReference {
		cfg.RedemptionUnique, cfg.CacheTemplateCounts, cfg.Releases, cfg.Rebalance = true, true, true, true
	}
	if cfg.ReleaseEvery <= 0 {
		cfg.ReleaseEvery = 10 * time.Second
	}
	if cfg.RebalanceEvery <= 0 {
		cfg.RebalanceEvery = 30 * time.Second
	}
	if cfg.QuotaDefaults == (quota.Policy{}) {
		cfg.QuotaDefaults = quota.Defaults()
	}
	if err := cfg.QuotaDefaults.Validate(); err != nil {
		return fmt.Errorf("sink: default quota policy: %w", err)
	}
	if cfg.Rebalance && cfg.Mapping.ChannelQuota == nil {
		return errors.New("sink: rebalancing needs channel quotas in the mapping")
	}
	if cfg.ChannelLow < 0 || cfg.ChannelLow >= 1 {
		return fmt.Errorf("sink: ChannelLow %v is not a share from 0 (off) to below 1", cfg.ChannelLow)
	}
	if cfg.MaxLabelTemplates <= 0 {
		cfg.MaxLabelTemplates = 200
	}
	defaults.LogMetricsClock(&cfg.Logger, &cfg.Registerer, &cfg.Now)
	return nil
}

// checkMode settles the mode and the mapping, which must agree.
func (cfg *Config) checkMode() error {
	if cfg.Mapping == nil && cfg.Mode != ModeLegacy {
		cfg.Mapping = canal.DefaultMapping()
	}
	switch cfg.Mode {
	case "":
		cfg.Mode = ModeLegacy
		if cfg.Mapping.Reference() {
			cfg.Mode = ModeReference
		}
	case ModeReference:
		if !cfg.Mapping.Reference() {
			return errors.New("sink: reference mode reads couponlink's own tables, but the mapping names a legacy schema; use legacy mode with it")
		}
	case ModeLegacy:
		if cfg.Mapping == nil {
			return errors.New("sink: legacy mode needs the mapping of the legacy tables (couponlink cdc -mapping FILE)")
		}
	default:
		return fmt.Errorf("sink: unknown mode %q (want reference or legacy)", string(cfg.Mode))
	}
	return nil
}

// LeaderName is this process's name as a leader (cdc_checkpoint.leader,
// Config.Leader's default): host:pid.
func LeaderName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}
