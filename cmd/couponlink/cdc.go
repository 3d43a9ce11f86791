package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/redact"
	"github.com/couponlink/couponlink/internal/redisconn"
	"github.com/couponlink/couponlink/internal/settings"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/quota"
	"github.com/couponlink/couponlink/sink"
	"github.com/couponlink/couponlink/webhook"
)

// cdcSettings are couponlink cdc's flags, by concern.
type cdcSettings struct {
	daemonSettings
	// the binlog stream: which server, as which replica, the leader lock
	binlogDSN     *string
	serverID      *int
	leaderTimeout *time.Duration
	rebuild       *bool
	// batches of counters, and the source rows the mapping cannot decode
	batchRows  *int
	batchWait  *time.Duration
	strict     *bool
	auditFirst *bool
	claimed    *bool
	stallAfter *time.Duration
	cpuProfile *string
	// the sink's chores and the default quota policy
	grace, releaseEvery, rebalanceEvery *time.Duration
	policy                              func() quota.Policy
	// the events: the webhook, the stream sinks
	hooks  *webhookSettings
	events *eventSettings
}

const cdcSummary = "Tails the MySQL binlog and turns coupon row changes into counters (exactly-once, with the checkpoint), Redis stock keys, anomalies and metrics. One leader per checkpoint; a second cdc waits as a hot standby."

func cdcFlags(stderr io.Writer) (*settings.Flags, *cdcSettings) {
	f := newFlags("cdc", cdcSummary, stderr)
	o := &cdcSettings{}
	o.register(f, "cdc", daemonUses{
		mapping:   "YAML file naming a legacy schema's tables, columns and status codes (default: the reference schema)",
		source:    "with a mapping that names several servers (sources:), the source this cdc follows: its DSN replaces -dsn, its name is the checkpoint name and the source label of the metrics",
		redis:     "Redis address for the stock keys (host:port, or redis://[user:password@]host:port[/db], rediss:// for TLS), or a comma-separated list of a Redis Cluster's nodes (empty: no Redis)",
		redisMode: "owner (couponlink writes the stock keys; default for the reference schema), corrector (a legacy front end owns them; default with -mapping) or off",
		name:      "checkpoint name (one per source schema or primary; the cdcs of one name elect one leader, the others wait as standbys)",
		metrics:   "listen address of /metrics, /healthz and /status (the status as JSON, as couponlink status -json prints it; empty: none)",
	})
	o.binlogDSN = f.EnvRedacted("binlog-dsn", "COUPONLINK_BINLOG_DSN", "", "read the binlog from this server instead of -dsn's: a replica of it with log_slave_updates=ON (docs/cdc.md, \"Failover and replicas\"); the counters, checkpoint and leader lock stay on -dsn's server, the primary; empty: -dsn's server")
	o.serverID = f.EnvInt("server-id", "COUPONLINK_CDC_SERVER_ID", 0, "replica server id the cdc uses on the binlog stream (0: derived from the checkpoint name and pid)")
	o.leaderTimeout = f.EnvDuration("leader-timeout", "COUPONLINK_CDC_LEADER_TIMEOUT", sink.DefaultLeaderTimeout, "how long the leader lock outlives a leader the server cannot hear from (host gone, network partition; the lock session's wait_timeout; at least 2s): a standby takes over within it. A leader whose process dies frees the lock at once")
	o.rebuild = f.EnvBool("rebuild", "COUPONLINK_CDC_REBUILD", false, "rebuild the counters from a consistent snapshot, then stream from its position")
	o.batchRows = f.EnvInt("batch-rows", "COUPONLINK_CDC_BATCH_ROWS", 5000, "the most rows one batch (one MySQL transaction of counters) gathers while the previous one is applied")
	o.batchWait = f.EnvDuration("batch-wait", "COUPONLINK_CDC_BATCH_WAIT", 0, "if positive, a batch waits up to this long after its first row for more (fewer, larger batches; more lag); 0: applied as soon as the sink is free")
	o.auditFirst = f.EnvBool("audit-at-bootstrap", "COUPONLINK_CDC_AUDIT_AT_BOOTSTRAP", true, "after each bootstrap, audit the shop's tables in the background as couponlink audit -record does, and record what was already wrong as found_at_attach findings (they never page)")
	o.claimed = f.EnvBool("claimed-sets", "COUPONLINK_CDC_CLAIMED_SETS", false, "owner mode: keep the per-template \"already claimed\" Redis sets (<prefix>claimed:{<template>}: the users at their per-user limit) that front ends read before a claim; costs one read of the touched users' coupons per batch (docs/cdc.md)")
	o.strict = f.EnvBool("strict", "COUPONLINK_CDC_STRICT", false, "stop (no retry) at a source row the mapping cannot decode (NULL or unmapped status, NULL id) instead of recording an undecodable_row anomaly and going on")
	o.stallAfter = f.EnvDuration("stall-after", "COUPONLINK_CDC_STALL_AFTER", 30*time.Second, "the checkpoint behind the server's binlog end and not moving for this long is a stall: /healthz answers 503 and couponlink_cdc_stalled is 1")
	o.cpuProfile = f.EnvString("cpuprofile", "COUPONLINK_CDC_CPUPROFILE", "", "write a CPU profile of the whole run to this file (read it with go tool pprof); it is complete once the cdc has stopped (SIGTERM); empty: none")
	o.grace = f.EnvDuration("redemption-grace", "COUPONLINK_REDEMPTION_GRACE", 30*time.Second, "how long a USED coupon may wait for its redemption row before it is an anomaly")
	o.releaseEvery = f.EnvDuration("release-every", "COUPONLINK_RELEASE_EVERY", 10*time.Second, "how often expired coupons whose release cooldown is over are looked for")
	o.rebalanceEvery = f.EnvDuration("rebalance-every", "COUPONLINK_REBALANCE_EVERY", 30*time.Second, "how often the channel-quota rebalancing rule runs")
	o.policy = quotaDefaultFlags(f)
	o.hooks = webhookFlags(f)
	o.events = eventFlags(f)
	return f, o
}

func runCDC(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, o := cdcFlags(stderr)
	if err := f.Parse(args); err != nil {
		return err
	}
	format, err := webhook.ParseFormat(*o.events.format, *o.cp.Name)
	if err != nil {
		return fmt.Errorf("-event-format: %w", err)
	}
	inventory.SetSnapshotMethod(*o.snapshot.Method)
	base := o.logging.Logger(stderr) // sink, canal and webhook name their components
	gogc := tuneCDCGC()
	stopProfile, err := startCPUProfile(*o.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	all, err := readMapping(*o.mapping.File)
	if err != nil {
		return err
	}
	m, err := o.useSource(all)
	if err != nil {
		return err
	}
	if *o.mapping.Source != "" {
		base = base.With("source", *o.mapping.Source) // one of several cdcs, one per server
	}
	log := base.With("component", "cdc")
	log.Info("garbage collector", "gogc", gogc)
	// a partitioned leader's sessions (an open batch holds the checkpoint
	// row) end with its lock's, within -leader-timeout
	if err := settings.NeedDSN(*o.db.DSN); err != nil {
		return err
	}
	db, err := mysqlconn.OpenCDC(*o.db.DSN, 8, *o.leaderTimeout)
	if err != nil {
		return err
	}
	defer db.Close() // after every part below has stopped
	binlogDB := db
	if *o.binlogDSN != "" {
		if binlogDB, err = openMySQL(*o.binlogDSN, 3); err != nil {
			return fmt.Errorf("-binlog-dsn: %w", err)
		}
		defer binlogDB.Close()
		log.Info("reading the binlog of another server than the counters'", "binlog_server", binlogAddr(*o.binlogDSN))
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	rdb, err := o.openRedis(log)
	if err != nil {
		return err
	}
	if rdb != nil {
		defer rdb.Close()
	}
	peers, err := peersOf(all, *o.mapping.Source)
	if err != nil {
		return err
	}
	defer closePeers(peers)
	d, err := o.daemon(db, binlogDB, m, peers, rdb, reg, base)
	if err != nil {
		return err
	}
	sm, err := sinkMetrics(reg, *o.hooks.url != "" || o.events.on())
	if err != nil {
		return err
	}
	hooks, err := o.hooks.dispatcher(db, reg, sm, *o.cp.Name, format, d.Sink.LeaderEpoch, base)
	if err != nil {
		return err
	}
	relays, err := o.events.relays(db, sm, hooks == nil, *o.cp.Name, format, d.Sink.LeaderEpoch, o.redis.TLS, base)
	if err != nil {
		return err
	}
	return o.run(ctx, cdcParts{reg: reg, db: db, mapping: m, daemon: d, hooks: hooks, relays: relays}, log)
}

// openRedis opens the cdc's Redis client, with one-second timeouts; nil
// (a warning logged) when no Redis is set.
func (o *cdcSettings) openRedis(log *slog.Logger) (redis.UniversalClient, error) {
	if *o.redis.Addr == "" {
		log.Warn("no Redis: the stock keys are not kept; set COUPONLINK_REDIS_ADDR (or -redis) to keep them")
		return nil, nil
	}
	ro := o.redis.Options()
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = time.Second, time.Second, time.Second
	return redisconn.Open(ro)
}

// cdcParts are what a running cdc is made of.
type cdcParts struct {
	reg     *prometheus.Registry
	db      *sql.DB
	mapping *canal.Mapping
	daemon  *sink.Daemon
	hooks   *webhook.Dispatcher
	relays  []*webhook.Relay
}

// run runs the parts of a cdc in one group: the first part that fails
// stops the others, and the database closes only when all have returned.
func (o *cdcSettings) run(ctx context.Context, p cdcParts, log *slog.Logger) error {
	g, gctx := errgroup.WithContext(ctx)
	if *o.metrics.Addr != "" {
		ops, err := listenOps(*o.metrics.Addr, p.reg, p.db, *o.cp.Name, p.mapping, p.daemon.Stalled, log)
		if err != nil {
			return err
		}
		ops.record(ctx, p.db, *o.cp.Name)
		g.Go(func() error { return ops.Run(gctx) })
	}
	if p.hooks != nil {
		log.Info("webhooks on", "url", redact.String(*o.hooks.url))
		g.Go(func() error {
			if err := p.hooks.Run(gctx); err != nil {
				return fmt.Errorf("webhook dispatcher: %w", err)
			}
			return nil
		})
	}
	for _, r := range p.relays {
		log.Info("event sink on", "sink", r.Name())
		g.Go(func() error { return r.Run(gctx) }) // a sink that is down holds back only itself
	}
	// the daemon waits for MySQL (at start too), checks the mapping and
	// outlives database restarts; it returns only on ctx or what a restart
	// cannot fix
	g.Go(func() error { return p.daemon.Run(gctx) })
	return g.Wait()
}

// daemon is the sink, with its chores, and the tailer feeding it; m is
// the legacy mapping (nil: the reference schema).
func (o *cdcSettings) daemon(db, binlogDB *sql.DB, m *canal.Mapping, peers []sink.Peer, rdb redis.UniversalClient, reg prometheus.Registerer, log *slog.Logger) (*sink.Daemon, error) {
	redisMode, err := inventory.ParseRedisMode(*o.redis.Mode)
	if err != nil {
		return nil, fmt.Errorf("-redis-mode: %w", err)
	}
	if m != nil && m.Source() != "" {
		if redisMode == inventory.RedisOwner {
			return nil, fmt.Errorf("-redis-mode owner: with several sources no one cdc knows a template's whole stock; use corrector (couponlink reconcile sets the keys from the sum over sources) or off")
		}
		// every series says which source it counts: dashboards and alerts sum over sources
		reg = prometheus.WrapRegistererWith(prometheus.Labels{"source": m.Source()}, reg)
	}
	scfg := sink.Config{DB: db, Mode: sink.ModeReference, Mapping: canal.DefaultMapping(), Name: *o.cp.Name, Redis: rdb, RedisMode: redisMode,
		Keys: inventory.Keys{Prefix: *o.redis.Prefix}, RedemptionGrace: *o.grace, Logger: log, Registerer: reg, ReleaseEvery: *o.releaseEvery,
		RebalanceEvery: *o.rebalanceEvery, QuotaDefaults: o.policy(), Webhooks: *o.hooks.url != "" || o.events.on(), ChannelLow: *o.events.lowShare, Strict: *o.strict, Peers: peers,
		BinlogDB: binlogDB, LeaderTimeout: *o.leaderTimeout, ClaimedSets: *o.claimed}
	if err := scfg.QuotaDefaults.Validate(); err != nil {
		return nil, fmt.Errorf("default quota policy (-quota-* flags): %w", err)
	}
	if m != nil {
		scfg.Mapping, scfg.Mode = m, sink.ModeLegacy
	}
	if *o.auditFirst {
		scfg.Bootstrapped = auditAtBootstrap(db, scfg.Mapping, *o.cp.Name, log)
	}
	tcfg, err := tailerConfig(*o.db.DSN, *o.binlogDSN, *o.serverID)
	if err != nil {
		return nil, err
	}
	tcfg.BatchRows, tcfg.BatchWait, tcfg.Logger = *o.batchRows, *o.batchWait, log
	s, err := sink.New(scfg)
	if err != nil {
		return nil, err
	}
	// the lifecycle of its anomalies: the alerts count the open ones
	if err := inventory.RegisterFindingsMetrics(reg, db, api.FindingFromCDC, inventory.AnomalyKinds); err != nil {
		return nil, err
	}
	return &sink.Daemon{Sink: s, Tailer: tcfg, Rebuild: *o.rebuild, StallAfter: *o.stallAfter}, nil
}

// useSource picks the mapping's source named by -source (its DSN replaces
// -dsn; its name is the checkpoint name) and returns that source's
// mapping; a mapping of one server is returned as it is.
func (o *cdcSettings) useSource(all *canal.Mapping) (*canal.Mapping, error) {
	if all == nil {
		if *o.mapping.Source != "" {
			return nil, fmt.Errorf("-source %q needs -mapping: sources are named in the mapping file", *o.mapping.Source)
		}
		return nil, nil
	}
	m, dsn, err := all.OneSource(*o.mapping.Source)
	if err != nil {
		return nil, err
	}
	if dsn != "" {
		*o.db.DSN, *o.cp.Name = dsn, *o.mapping.Source
	}
	return m, nil
}

// peersOf opens the mapping's sources other than the one this cdc
// follows, for the look-ups of sink.Peer (the connections open lazily: a
// peer that is down does not keep the cdc from starting).
func peersOf(all *canal.Mapping, self string) ([]sink.Peer, error) {
	if all == nil || !all.HasSources() {
		return nil, nil
	}
	conns, err := openSourceConns(all, self, 2)
	if err != nil {
		return nil, err
	}
	out := make([]sink.Peer, len(conns))
	for i, c := range conns {
		out[i] = sink.Peer{Name: c.name, DB: c.db, Mapping: c.m}
	}
	return out, nil
}

func closePeers(ps []sink.Peer) {
	for _, p := range ps {
		p.DB.Close()
	}
}

// sourceConn is one source of a mapping, opened: its name, mapping, DSN
// and a pool on its server.
type sourceConn struct {
	name, dsn string
	m         *canal.Mapping
	db        *sql.DB
}

// openSourceConns opens a pool of at most maxConns on every source of m
// but skip (none: ""); on an error it closes what it opened and names the
// source.
func openSourceConns(m *canal.Mapping, skip string, maxConns int) ([]sourceConn, error) {
	var out []sourceConn
	for _, name := range m.SourceNames() {
		if name == skip {
			continue
		}
		sm, dsn, err := m.OneSource(name)
		var db *sql.DB
		if err == nil {
			db, err = openMySQL(dsn, maxConns)
		}
		if err != nil {
			for _, c := range out {
				c.db.Close()
			}
			return nil, fmt.Errorf("source %s: %w", name, err)
		}
		out = append(out, sourceConn{name: name, dsn: dsn, m: sm, db: db})
	}
	return out, nil
}

// quotaDefaultFlags are the rebalancing policy of templates without an
// override; the cdc publishes them (quota_policy row 0) at start.
func quotaDefaultFlags(f *settings.Flags) func() quota.Policy {
	d := quota.Defaults()
	mode := f.EnvString("quota-mode", "COUPONLINK_QUOTA_MODE", d.Mode, "default rebalancing mode: off, signal (recommend only) or auto (move quota)")
	low := f.EnvFloat("quota-low", "COUPONLINK_QUOTA_LOW", d.Low, "a channel redeeming below this rate gives unclaimed quota")
	high := f.EnvFloat("quota-high", "COUPONLINK_QUOTA_HIGH", d.High, "a channel redeeming above this rate receives quota")
	minClaims := f.EnvInt("quota-min-claims", "COUPONLINK_QUOTA_MIN_CLAIMS", int(d.MinClaims), "claims a channel needs before its rate is judged")
	maxShare := f.EnvFloat("quota-max-share", "COUPONLINK_QUOTA_MAX_SHARE", d.MaxShare, "most of a giver's claimable quota one decision moves")
	reserve := f.EnvFloat("quota-reserve", "COUPONLINK_QUOTA_RESERVE", d.Reserve, "share of its quota a giver always keeps claimable")
	cooldown := f.EnvDuration("quota-cooldown", "COUPONLINK_QUOTA_COOLDOWN", time.Duration(d.CooldownSeconds)*time.Second, "at most one decision per template per this long")
	minAge := f.EnvDuration("quota-min-age", "COUPONLINK_QUOTA_MIN_AGE", time.Duration(d.MinAgeSeconds)*time.Second, "no decision before a campaign is this old")
	return func() quota.Policy {
		return quota.Policy{Mode: *mode, Low: *low, High: *high, MinClaims: int64(*minClaims), MaxShare: *maxShare, Reserve: *reserve,
			CooldownSeconds: int64(*cooldown / time.Second), MinAgeSeconds: int64(*minAge / time.Second)}
	}
}

// tailerConfig derives the binlog connection from couponlink's DSN (the
// checkpoint shares a transaction with the counters there), or from
// binlogDSN when set: a replica's address and credentials, and the
// database of the DSN when binlogDSN names none.
func tailerConfig(dsn, binlogDSN string, serverID int) (canal.Config, error) {
	tc, err := canal.ConfigFromDSN(dsn)
	if err != nil {
		return tc, err
	}
	if binlogDSN != "" {
		bc, err := canal.ConfigFromDSN(binlogDSN)
		if err != nil {
			return tc, fmt.Errorf("-binlog-dsn: %w", err)
		}
		if bc.Schema == "" {
			bc.Schema = tc.Schema
		}
		tc = bc
	}
	if serverID > 0 {
		tc.ServerID = uint32(serverID)
	}
	return tc, nil
}

// binlogAddr is the address a DSN names, for logs (never its password).
func binlogAddr(dsn string) string {
	c, err := canal.ConfigFromDSN(dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	return c.Addr
}
