// Package sink is the writer of the derived state: it turns the decoded
// binlog batches of the canal package into inventory counters and the
// checkpoint in one MySQL transaction (exactly-once), Redis stock keys,
// anomalies and metrics, and applies releases and rebalancing. Whatever it
// writes is read through package inventory (the read model), never here.
package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/quota"
)

// Config wires a Sink.
type Config struct {
	DB      *sql.DB        // couponlink's database: counters, checkpoint, anomalies
	Mapping *canal.Mapping // the source tables (canal.DefaultMapping() for the reference schema)
	Name    string         // checkpoint name; default "default"
	Leader  string         // who runs (for status); default host:pid

	Redis     redis.UniversalClient // nil: no Redis
	RedisMode inventory.RedisMode   // owner (default when the mapping has channel quotas), corrector, off
	Keys      inventory.Keys        // Redis key names; default prefix "couponlink:"

	// RedemptionGrace is how long a coupon may be USED before its
	// redemption row must exist. Default 30 s.
	RedemptionGrace time.Duration
	MaxPending      int // bound of the coupons awaiting that check; default 100,000
	// RedemptionUnique says the redemption table has a unique key on
	// (order, coupon), so duplicates cannot happen and are not looked for.
	// Default: true for the reference mapping.
	RedemptionUnique bool
	// CacheTemplateCounts refreshes coupon_template's cached counts. Default:
	// true for the reference mapping (a legacy template table is its application's).
	CacheTemplateCounts bool
	// Releases gives slots back to their channel buckets (void, recycle,
	// expiry under the release policy). Default: true for the reference
	// mapping (a legacy schema has no buckets couponlink may write).
	Releases     bool
	ReleaseEvery time.Duration // how often due expiry releases are looked for; default 10 s
	// Rebalance runs the channel-quota rule (package quota) on a timer.
	// Default: true for the reference mapping.
	Rebalance      bool
	RebalanceEvery time.Duration // default 30 s
	// QuotaDefaults is the policy of templates without an override; the
	// cdc publishes it (quota_policy row 0) at start. Zero: quota.Defaults().
	QuotaDefaults quota.Policy
	// Webhooks writes events (sold out, released, transfers, anomalies) to
	// the webhook outbox, in the transaction of the change they report.
	Webhooks          bool
	MaxLabelTemplates int // templates exported in couponlink_inventory; default 200

	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Now        func() time.Time
}

// Sink applies batches. It is not safe for concurrent ApplyBatch calls (the
// tailer calls it from one goroutine); metrics read it concurrently.
type Sink struct {
	cfg   Config
	db    *sql.DB
	src   *inventory.Source
	log   *slog.Logger
	m     *metrics
	epoch int64
	pos   canal.Position
	redis *stock

	mu       sync.RWMutex                         // guards the mirror below for the metrics collector
	counts   map[inventory.Pair]*inventory.Counts // inventory_counter at pos
	quotas   map[inventory.Pair]inventory.Quota   // channel_quota at pos (nil without channel quotas)
	tplQuota map[int64]int64                      // template quotas (without channel quotas)
	active   map[int64]time.Time

	pending      map[int64][]pendingUse             // coupon -> its moves into USED awaiting a redemption row
	npending     int                                // entries in pending, bounded by MaxPending
	pendingDirty map[redemptionKey]bool             // pending checks changed since the last commit (saved with the next one)
	quotaNext    map[inventory.Pair]inventory.Quota // the batch's quota changes, before commit

	lastCorrection int64            // newest correction_log id the mirror has seen
	correctionScan time.Time        // when correction_log was last looked at
	releaseScan    time.Time        // when due expiry releases were last looked for
	rebalanceScan  time.Time        // when the quota rule last ran
	badPolicy      map[int64]string // templates whose policy is invalid, with the error last logged
	releasePolicy  map[int64]bool   // template -> its expiry policy is release (immutable once created)
}

// New checks cfg and fills in its defaults. Call Start before ApplyBatch.
func New(cfg Config) (*Sink, error) {
	if cfg.DB == nil {
		return nil, errors.New("sink: Config.DB is nil")
	}
	reference := cfg.Mapping == nil
	if reference {
		cfg.Mapping = canal.DefaultMapping()
	}
	if cfg.Name == "" {
		cfg.Name = "default"
	}
	if cfg.Leader == "" {
		host, _ := os.Hostname()
		cfg.Leader = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if err := cfg.RedisMode.Validate(); err != nil {
		return nil, fmt.Errorf("sink: %w", err)
	}
	if cfg.RedisMode == "" {
		cfg.RedisMode = inventory.DefaultRedisMode(cfg.Mapping)
	}
	if cfg.RedisMode == inventory.RedisOwner && cfg.Mapping.ChannelQuota == nil {
		return nil, errors.New("sink: Redis owner mode needs channel quotas in the mapping; use corrector mode for a legacy schema")
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
	if reference {
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
		return nil, fmt.Errorf("sink: default quota policy: %w", err)
	}
	if cfg.Rebalance && cfg.Mapping.ChannelQuota == nil {
		return nil, errors.New("sink: rebalancing needs channel quotas in the mapping")
	}
	if cfg.MaxLabelTemplates <= 0 {
		cfg.MaxLabelTemplates = 200
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Sink{cfg: cfg, db: cfg.DB, src: inventory.NewSource(cfg.Mapping), log: cfg.Logger.With("component", "cdc"), m: newMetrics(cfg.Registerer),
		pending: map[int64][]pendingUse{}, pendingDirty: map[redemptionKey]bool{}, active: map[int64]time.Time{}, badPolicy: map[int64]string{},
		releasePolicy: map[int64]bool{}}
	if cfg.Redis != nil && cfg.RedisMode == inventory.RedisOwner {
		s.redis = &stock{rdb: cfg.Redis, keys: cfg.Keys, dirty: true}
	}
	cfg.Registerer.MustRegister(inventoryCollector{s: s, desc: prometheus.NewDesc("couponlink_inventory",
		"Derived inventory per template and channel at the checkpoint, by state (quota, claimable, held, used, expired, returned, released, frozen); only the most recently active templates.",
		[]string{"template", "channel", "state"}, nil),
		rate: prometheus.NewDesc("couponlink_redemption_rate",
			"Redemption rate per template and channel at the checkpoint: used / (claimed - released); only the most recently active templates.",
			[]string{"template", "channel"}, nil),
		over: prometheus.NewDesc("couponlink_over_issued",
			"Channel buckets (templates, without channel quotas) holding more coupons (held+used+frozen) than their quota at the checkpoint, over every template.",
			nil, nil)})
	return s, nil
}

// Start makes this sink the checkpoint's writer and loads its state. With
// no checkpoint, or with rebuild, it first bootstraps the counters from a
// consistent snapshot. It returns the position to tail from.
func (s *Sink) Start(ctx context.Context, rebuild bool) (canal.Position, error) {
	if _, err := s.db.ExecContext(ctx, `INSERT IGNORE INTO cdc_checkpoint (name, binlog_file, binlog_pos, gtid_set) VALUES (?, '', 0, '')`,
		s.cfg.Name); err != nil {
		return canal.Position{}, fmt.Errorf("create checkpoint row: %w", err)
	}
	var err error
	if s.epoch, err = takeEpoch(ctx, s.db, s.cfg.Name, s.cfg.Leader); err != nil {
		return canal.Position{}, err
	}
	s.m.leader.Set(1)
	cp, _, err := inventory.LoadCheckpoint(ctx, s.db, s.cfg.Name)
	if err != nil {
		return canal.Position{}, err
	}
	if cp.Pos.IsZero() || rebuild {
		if rebuild {
			s.log.Warn("rebuilding the counters from a consistent snapshot, as asked", "old_position", cp.Pos.String())
		} else {
			s.log.Info("no checkpoint yet: bootstrapping the counters from a consistent snapshot")
		}
		snap, err := s.bootstrap(ctx)
		if err != nil {
			return canal.Position{}, err
		}
		s.m.bootstraps.Inc()
		s.setMirror(snap.Counts, snap.Quotas)
		s.pos = snap.Pos
		if s.redis != nil {
			s.redis.dirty, s.redis.reset = true, true
		}
	} else {
		counts, err := inventory.LoadCounters(ctx, s.db)
		if err != nil {
			return canal.Position{}, err
		}
		quotas, err := s.src.Quotas(ctx, s.db)
		if err != nil {
			return canal.Position{}, err
		}
		s.setMirror(counts, quotas)
		s.pos = cp.Pos
		s.log.Info("resuming from checkpoint", "position", cp.Pos.String(), "epoch", s.epoch, "pairs", len(counts))
	}
	if err := s.loadPending(ctx); err != nil {
		return canal.Position{}, err
	}
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM correction_log`).Scan(&s.lastCorrection); err != nil {
		return canal.Position{}, fmt.Errorf("read corrections: %w", err)
	}
	if s.cfg.Rebalance {
		changed, err := quota.PublishDefaults(ctx, s.db, s.cfg.QuotaDefaults, "cdc "+s.cfg.Leader)
		if err != nil {
			return canal.Position{}, fmt.Errorf("publish the default quota policy: %w", err)
		}
		if changed {
			s.log.Info("default quota policy published (templates without an override follow it)", "policy", s.cfg.QuotaDefaults)
		}
	}
	if s.quotas == nil {
		if err := s.loadTemplateQuotas(ctx); err != nil {
			return canal.Position{}, err
		}
	}
	if s.redis != nil {
		s.syncRedis(ctx, nil)
	}
	return s.pos, nil
}

func (s *Sink) setMirror(counts map[inventory.Pair]*inventory.Counts, quotas map[inventory.Pair]inventory.Quota) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts, s.quotas = counts, quotas
	now := s.cfg.Now()
	for p := range counts {
		s.active[p.Template] = now
	}
}

func (s *Sink) loadTemplateQuotas(ctx context.Context) error {
	ids := templatesIn(s.counts)
	q, err := s.src.TemplateQuotas(ctx, s.db, ids)
	if err != nil {
		return fmt.Errorf("read template quotas: %w", err)
	}
	s.mu.Lock() // the metrics collector reads it
	s.tplQuota = q
	s.mu.Unlock()
	return nil
}

// Position is the checkpoint the sink has committed.
func (s *Sink) Position() canal.Position { return s.pos }

// ApplyBatch applies one batch: counters, anomalies and checkpoint in one
// transaction; then Redis. An error leaves MySQL as it was before the
// batch; the caller must stop and restart from the checkpoint.
func (s *Sink) ApplyBatch(ctx context.Context, b *canal.Batch) error {
	start := time.Now()
	if b.Empty() {
		return s.idle(ctx, b)
	}
	d := inventory.FromBatch(b)
	s.quotaNext = map[inventory.Pair]inventory.Quota{}
	for _, qc := range b.Quotas {
		p := inventory.Pair{Template: qc.Template, Channel: qc.Channel}
		if qc.Deleted {
			s.quotaNext[p] = inventory.Quota{}
		} else {
			s.quotaNext[p] = inventory.Quota{Quota: qc.Quota, Claimed: qc.Claimed}
		}
	}
	next := make(map[inventory.Pair]*inventory.Counts, len(d))
	for p, delta := range d {
		c := inventory.Counts{}
		if old := s.counts[p]; old != nil {
			c = *old
		}
		c.Add(*delta)
		next[p] = &c
	}
	if s.quotas == nil {
		if err := s.learnTemplates(ctx, d); err != nil {
			return err
		}
	}
	anomalies, err := s.judge(ctx, b, next)
	if err != nil {
		return err
	}
	// every touched pair, even with a net zero delta: its stamp must move
	pairs := make([]inventory.Pair, 0, len(d))
	for p := range d {
		pairs = append(pairs, p)
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].Less(pairs[j]) })
	templates := templatesOf(pairs)
	var applied []release
	var all []Anomaly // anomalies, and the duplicates the transaction finds
	err = sqltx.Run(ctx, s.db, nil, func(tx *sql.Tx) error {
		if err := writeCounters(ctx, tx, pairs, d, true, inventory.Stamp(b.End)); err != nil {
			return err
		}
		if err := s.refreshTemplates(ctx, tx, templates); err != nil {
			return err
		}
		dups, err := s.countRedemptions(ctx, tx, b)
		if err != nil {
			return err
		}
		all = append(anomalies[:len(anomalies):len(anomalies)], dups...)
		if err := insertAnomalies(ctx, tx, all, b); err != nil {
			return err
		}
		if err := s.savePending(ctx, tx); err != nil {
			return err
		}
		if s.cfg.Releases {
			if applied, err = applyReleases(ctx, tx, releasesOf(b), s.cfg.Now().UTC()); err != nil {
				return err
			}
			if err := s.scheduleExpiries(ctx, tx, b); err != nil {
				return err
			}
		}
		if err := s.enqueue(ctx, tx, s.batchEvents(b, applied, all)); err != nil {
			return err
		}
		return saveCheckpoint(ctx, tx, s.cfg.Name, s.epoch, b, len(all))
	})
	if err != nil {
		return fmt.Errorf("apply batch ending at %s: %w", b.End, err)
	}
	clear(s.pendingDirty)
	s.m.releases.Add(float64(len(applied)))
	s.commitMirror(next, b.End)
	s.observe(b, all, start)
	if s.redis != nil {
		s.syncRedis(ctx, s.touchedTemplates(b, templates))
		s.freshenReleased(ctx, applied)
	}
	s.m.batchDuration.Observe(time.Since(start).Seconds())
	return s.periodic(ctx)
}

// idle handles a heartbeat: save a moved position, run due checks, and
// keep Redis whole.
func (s *Sink) idle(ctx context.Context, b *canal.Batch) error {
	s.m.lag.Set(0)
	due := len(s.pending) > 0
	if b.End != s.pos || due {
		s.quotaNext = nil
		var anomalies []Anomaly
		if due {
			var err error
			if anomalies, err = s.duePending(ctx); err != nil {
				return err
			}
		}
		if b.End != s.pos || len(anomalies) > 0 || len(s.pendingDirty) > 0 {
			err := sqltx.Run(ctx, s.db, nil, func(tx *sql.Tx) error {
				if err := insertAnomalies(ctx, tx, anomalies, b); err != nil {
					return err
				}
				if err := s.savePending(ctx, tx); err != nil {
					return err
				}
				if err := s.enqueue(ctx, tx, s.batchEvents(b, nil, anomalies)); err != nil {
					return err
				}
				return saveCheckpoint(ctx, tx, s.cfg.Name, s.epoch, b, len(anomalies))
			})
			if err != nil {
				return fmt.Errorf("save idle checkpoint %s: %w", b.End, err)
			}
			clear(s.pendingDirty)
			s.pos = b.End
			s.countAnomalies(anomalies)
		}
		s.m.pendingChecks.Set(float64(s.npending))
	}
	if err := s.periodic(ctx); err != nil {
		return err
	}
	if s.redis != nil {
		s.syncRedis(ctx, nil)
	}
	return nil
}

// periodic runs the timed chores, on heartbeats and between busy batches.
func (s *Sink) periodic(ctx context.Context) error {
	if err := s.followCorrections(ctx); err != nil {
		return err
	}
	if s.cfg.Releases && s.cfg.Now().Sub(s.releaseScan) >= s.cfg.ReleaseEvery {
		s.releaseScan = s.cfg.Now()
		applied, err := s.releaseDue(ctx, 500)
		if err != nil {
			return fmt.Errorf("release expired slots: %w", err)
		}
		if n := len(applied); n > 0 {
			s.m.releases.Add(float64(n))
			s.log.Info("released the slots of expired coupons (release policy, cooldown over)", "coupons", n)
			s.freshenReleased(ctx, applied)
		}
	}
	if s.cfg.Rebalance && s.cfg.Now().Sub(s.rebalanceScan) >= s.cfg.RebalanceEvery {
		s.rebalanceScan = s.cfg.Now()
		if err := s.rebalance(ctx); err != nil {
			return fmt.Errorf("rebalance channel quota: %w", err)
		}
	}
	return nil
}

// followCorrections reloads the counter mirror (metrics, over-issue) when
// the reconciler or a person corrected inventory_counter. The counters in
// MySQL need nothing: the cdc adds deltas to whatever they hold.
func (s *Sink) followCorrections(ctx context.Context) error {
	now := s.cfg.Now()
	if now.Sub(s.correctionScan) < time.Second {
		return nil
	}
	s.correctionScan = now
	var last int64
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM correction_log`).Scan(&last); err != nil {
		return fmt.Errorf("look for corrections: %w", err)
	}
	if last == s.lastCorrection {
		return nil
	}
	counts, err := inventory.LoadCounters(ctx, s.db)
	if err != nil {
		return err
	}
	s.setMirror(counts, s.quotas)
	s.lastCorrection = last
	s.log.Info("counters corrected outside the cdc: mirror reloaded", "correction_id", last)
	return nil
}

func (s *Sink) learnTemplates(ctx context.Context, d inventory.Deltas) error {
	var unknown []int64
	for p := range d {
		if _, ok := s.tplQuota[p.Template]; !ok {
			unknown = append(unknown, p.Template)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	q, err := s.src.TemplateQuotas(ctx, s.db, unknown)
	if err != nil {
		return fmt.Errorf("read template quotas: %w", err)
	}
	s.mu.Lock() // the metrics collector reads it
	defer s.mu.Unlock()
	if s.tplQuota == nil {
		s.tplQuota = map[int64]int64{}
	}
	maps.Copy(s.tplQuota, q)
	return nil
}

func (s *Sink) nextQuota(p inventory.Pair) (inventory.Quota, bool) {
	if q, ok := s.quotaNext[p]; ok {
		return q, true
	}
	q, ok := s.quotas[p]
	return q, ok
}

func (s *Sink) commitMirror(next map[inventory.Pair]*inventory.Counts, end canal.Position) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	maps.Copy(s.counts, next)
	for p := range next {
		s.active[p.Template] = now
	}
	if s.quotas != nil {
		for p, q := range s.quotaNext {
			s.quotas[p] = q
			s.active[p.Template] = now
		}
	}
	s.pos = end
}

func (s *Sink) touchedTemplates(b *canal.Batch, templates []int64) []int64 {
	if len(b.Quotas) == 0 {
		return templates
	}
	seen := map[int64]bool{}
	for _, t := range templates {
		seen[t] = true
	}
	for _, q := range b.Quotas {
		if !seen[q.Template] {
			seen[q.Template] = true
			templates = append(templates, q.Template)
		}
	}
	return templates
}

func (s *Sink) observe(b *canal.Batch, anomalies []Anomaly, start time.Time) {
	var ins, upd, del int
	for i := range b.Transitions {
		switch t := &b.Transitions[i]; {
		case t.From == 0:
			ins++
		case t.To == 0:
			del++
		default:
			upd++
		}
	}
	add := func(table, kind string, n int) {
		if n > 0 {
			s.m.events.WithLabelValues(table, kind).Add(float64(n))
		}
	}
	add("user_coupon", "insert", ins)
	add("user_coupon", "update", upd)
	add("user_coupon", "delete", del)
	var rdel int
	for i := range b.Redemptions {
		if b.Redemptions[i].Deleted {
			rdel++
		}
	}
	add("redemption_log", "insert", len(b.Redemptions)-rdel)
	add("redemption_log", "delete", rdel)
	add("inventory_flow", "insert", len(b.Flows))
	var qins, qdel int
	for i := range b.Quotas {
		switch {
		case b.Quotas[i].Inserted:
			qins++
		case b.Quotas[i].Deleted:
			qdel++
		}
	}
	add("channel_quota", "insert", qins)
	add("channel_quota", "update", len(b.Quotas)-qins-qdel)
	add("channel_quota", "delete", qdel)
	s.m.batchRows.Observe(float64(b.Rows))
	if !b.EventTime.IsZero() {
		s.m.lag.Set(max(0, s.cfg.Now().Sub(b.EventTime).Seconds()))
		s.m.checkpointTime.Set(float64(b.EventTime.Unix()))
	}
	s.countAnomalies(anomalies)
	s.m.pendingChecks.Set(float64(s.npending))
}

func (s *Sink) countAnomalies(as []Anomaly) {
	for _, a := range as {
		s.m.anomalies.WithLabelValues(a.Kind).Inc()
		s.log.Warn("anomaly", "kind", a.Kind, "coupon", a.Coupon, "template", a.Template, "channel", a.Channel,
			"from", a.From.String(), "to", a.To.String(), "order", a.Order, "position", s.pos.String(), "detail", a.Detail)
	}
}

// syncRedis writes the stock keys of the given templates, or rebuilds all
// of them when Redis missed writes or was flushed. Redis trouble never
// stops the counters: it is logged, counted, and retried.
func (s *Sink) syncRedis(ctx context.Context, templates []int64) {
	r := s.redis
	now := s.cfg.Now()
	if !r.dirty && now.Sub(r.lastProbe) >= time.Second {
		r.lastProbe = now
		if gone, err := r.flushed(ctx); err != nil || gone {
			if err == nil {
				s.log.Warn("Redis lost the stock keys (flushed or restarted): rebuilding them from MySQL")
			}
			r.dirty = true
		}
	}
	stamp := inventory.Stamp(s.pos)
	var err error
	switch {
	case r.dirty && now.Before(r.nextTry):
		err = errors.New("waiting to retry")
	case r.dirty:
		s.mu.RLock()
		quotas := maps.Clone(s.quotas)
		s.mu.RUnlock()
		if err = r.rebuild(ctx, quotas, stamp); err == nil {
			s.m.redisRebuilds.Inc()
			s.log.Info("Redis stock keys rebuilt", "templates", len(templatesIn(quotas)), "position", s.pos.String(), "behind_batches", r.behind)
			r.dirty = false
		}
	case len(templates) > 0:
		err = r.write(ctx, s.quotas, templates, stamp, false)
	}
	if err != nil {
		if len(templates) > 0 || r.behind == 0 {
			r.behind++
		}
		if !r.dirty || now.After(r.nextTry) {
			s.m.redisWrites.WithLabelValues("error").Inc()
			s.log.Error("Redis stock write failed; counters go on, Redis will be rebuilt", "err", err, "behind_batches", r.behind)
			r.nextTry = now.Add(time.Second)
		}
		r.dirty = true
	} else if len(templates) > 0 || r.behind > 0 {
		s.m.redisWrites.WithLabelValues("ok").Inc()
		r.behind = 0
	}
	s.m.redisBehind.Set(float64(r.behind))
}
