// Package sink is the writer of the derived state: it turns the decoded
// binlog batches of the canal package into inventory counters and the
// checkpoint in one MySQL transaction (exactly-once), Redis stock keys,
// anomalies and metrics; beside the batches its chores give slots back and
// rebalance channel quota. Whatever it writes is read through package
// inventory (the read model), never here.
package sink

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/quota"
)

// Sink applies batches. It is not safe for concurrent ApplyBatch calls (the
// tailer calls it from one goroutine); its chores' passes take turns with
// the batches, and metrics read it concurrently.
type Sink struct {
	cfg   Config
	db    *sql.DB
	src   *inventory.Queries
	log   *slog.Logger
	m     *metrics
	epoch int64
	pos   canal.Position
	prog  atomic.Pointer[progress] // the saved checkpoint, for the stall watch (nil: not leading)
	redis *stock                   // the Redis writer; not safe for concurrent use (guarded by work)
	peers []*peer                  // the mapping's other sources (peers.go)

	multi    bool           // db takes several statements in one query: a batch's tail goes in one round trip (groupcommit.go)
	ledUnder *Leader        // the leader lock the epoch was taken under (nil: none, Start)
	retries  *sqltx.Retries // its transactions that run again after a deadlock

	// work is held by ApplyBatch for a batch and by a chore for a pass:
	// they read and change the mirror, the checks' state and the Redis writer.
	work sync.Mutex

	mu     sync.RWMutex                         // guards the mirror below for the metrics collector
	counts map[inventory.Pair]*inventory.Counts // inventory_counter at pos
	quotas map[inventory.Pair]inventory.Quota   // channel_quota at pos (nil without channel quotas)
	tpl    map[int64]inventory.TemplateInfo     // template rules at pos (a mapping that follows templates); see templates.go
	active map[int64]time.Time

	pipe pipeline // the checks and the steps of a batch (pipeline.go), with the checks' state

	lastCorrection int64 // newest correction_log id the mirror has seen
	// overJudged is what the truth said of the buckets the mirror shows
	// over their quota (overissue.go); guarded by mu
	overJudged map[inventory.Pair]overVerdict
	// overUnsettled are the buckets whose counters and coupons still
	// disagreed after every recount of a batch's over-issue, and when: a
	// drifted counter is recounted once per overRecountEvery, not at each
	// batch (overissue.go); guarded by mu
	overUnsettled map[inventory.Pair]time.Time

	rebalancer                      *quota.Rebalancer
	releases, rebalance, correcting *Chore
	mailPrune                       *Chore // the mail the judge decided (sourcesprune.go)
}

// New checks cfg and fills in its defaults. Call Start before ApplyBatch.
func New(cfg Config) (*Sink, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	s := &Sink{cfg: cfg, db: cfg.DB, src: inventory.NewQueries(cfg.Mapping), log: cfg.Logger.With("component", "cdc"), m: newMetrics(cfg.Registerer),
		active: map[int64]time.Time{}, peers: newPeers(cfg.Peers)}
	s.retries = sqltx.NewRetries(cfg.Registerer, s.log, "batch", "release")
	s.pipe = s.newPipeline()
	if cfg.Redis != nil && cfg.RedisMode == inventory.RedisOwner {
		keys := cfg.Keys
		if cfg.Name != "default" {
			keys.Owner = cfg.Name // cdcs of several primaries may share a prefix: a marker each
		}
		s.redis = &stock{rdb: cfg.Redis, keys: keys, dirty: true}
	}
	if err := s.newChores(); err != nil {
		return nil, err
	}
	cfg.Registerer.MustRegister(newInventoryCollector(s))
	if err := inventory.RegisterSnapshotMetrics(cfg.Registerer); err != nil {
		return nil, err
	}
	return s, nil
}

// Mode is whose tables the sink reads.
func (s *Sink) Mode() Mode { return s.cfg.Mode }

// Start makes this sink the checkpoint's writer and loads its state. With
// no checkpoint, or with rebuild, it first bootstraps the counters from a
// consistent snapshot. It returns the position to tail from.
func (s *Sink) Start(ctx context.Context, rebuild bool) (canal.Position, error) {
	return s.start(ctx, rebuild, nil)
}

// start is Start under the leader lock under (nil: none).
func (s *Sink) start(ctx context.Context, rebuild bool, under *Leader) (canal.Position, error) {
	s.work.Lock()
	defer s.work.Unlock()
	if _, err := s.db.ExecContext(ctx, `INSERT IGNORE INTO cdc_checkpoint (name, binlog_file, binlog_pos, gtid_set) VALUES (?, '', 0, '')`,
		s.cfg.Name); err != nil {
		return canal.Position{}, fmt.Errorf("create checkpoint row: %w", err)
	}
	if err := s.lead(ctx, under); err != nil {
		return canal.Position{}, err
	}
	var err error
	if s.multi, err = multiStatements(ctx, s.db); err != nil {
		return canal.Position{}, err
	}
	cp, _, err := inventory.LoadCheckpoint(ctx, s.db, s.cfg.Name)
	if err != nil {
		return canal.Position{}, err
	}
	bootstrap := cp.Pos.IsZero() || rebuild
	if bootstrap {
		err = s.startFromSnapshot(ctx, cp, rebuild)
	} else {
		err = s.startFromCheckpoint(ctx, cp)
	}
	if err != nil {
		return canal.Position{}, err
	}
	if err := s.pipe.checks.resume(ctx, bootstrap); err != nil {
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
	if s.redis != nil {
		s.syncRedis(ctx, nil)
	}
	s.progressed(s.pos, cp.EventTime.Time)
	return s.pos, nil
}

// lead makes this sink the checkpoint's writer under a new epoch, unless
// it starts again under the lock it took its epoch under and never lost
// (under): a restart of its tail, not a takeover, keeps the epoch — fenced
// when the checkpoint's is another (a cdc took it without the lock). The
// server is asked whether the lock is still held: a lock lost since the
// leader's last ping fails the start (errLeaderLost), which gives it up.
func (s *Sink) lead(ctx context.Context, under *Leader) error {
	if under != nil && under == s.ledUnder {
		if err := under.check(ctx); err != nil {
			return fmt.Errorf("%w: %w", errLeaderLost, err)
		}
		return keepEpoch(ctx, s.db, s.cfg.Name, s.epoch)
	}
	epoch, err := takeEpoch(ctx, s.db, s.cfg.Name, s.cfg.Leader)
	if err != nil {
		return err
	}
	s.epoch, s.ledUnder = epoch, under
	s.m.leader.Set(1)
	s.m.leaderEpoch.Set(float64(s.epoch))
	s.m.leaderTerms.Inc()
	return nil
}

// startFromSnapshot bootstraps the counters from a consistent snapshot.
func (s *Sink) startFromSnapshot(ctx context.Context, cp inventory.Checkpoint, rebuild bool) error {
	if rebuild {
		s.log.Warn("rebuilding the counters from a consistent snapshot, as asked", "old_position", cp.Pos.String())
	} else {
		s.log.Info("no checkpoint yet: bootstrapping the counters from a consistent snapshot")
	}
	snap, err := s.bootstrap(ctx)
	if err != nil {
		return err
	}
	s.m.bootstraps.Inc()
	s.setMirror(snap.Counts, snap.Quotas)
	s.judgeOverIssueByTruth(ctx, nil)
	s.pos = snap.Pos
	if s.redis != nil {
		s.redis.dirty, s.redis.reset = true, true
	}
	if s.cfg.Bootstrapped != nil {
		s.cfg.Bootstrapped(ctx, snap.Pos)
	}
	return nil
}

// startFromCheckpoint loads the counters the checkpoint covers.
func (s *Sink) startFromCheckpoint(ctx context.Context, cp inventory.Checkpoint) error {
	counts, err := inventory.LoadCounters(ctx, s.db)
	if err != nil {
		return err
	}
	quotas, err := s.src.Quotas(ctx, s.db)
	if err != nil {
		return err
	}
	s.setMirror(counts, quotas)
	s.judgeOverIssueByTruth(ctx, nil)
	s.pos = cp.Pos
	s.log.Info("resuming from checkpoint", "position", cp.Pos.String(), "epoch", s.epoch, "pairs", len(counts))
	return nil
}

// useMapping makes m, the mapping resolved at this start, the one of the
// sink's queries and of the tailer (the next start resolves again).
func (s *Sink) useMapping(m *canal.Mapping) { s.cfg.Mapping, s.src = m, inventory.NewQueries(m) }

// Position is the checkpoint the sink has committed.
func (s *Sink) Position() canal.Position { return s.pos }
