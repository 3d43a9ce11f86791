package sink

import (
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/quota"
)

type metrics struct {
	events         *prometheus.CounterVec
	lag            prometheus.Gauge
	stalled        prometheus.Gauge
	batchDuration  prometheus.Histogram
	batchRows      prometheus.Histogram
	checkpointTime prometheus.Gauge
	anomalies      *prometheus.CounterVec
	redisBehind    prometheus.Gauge
	redisWrites    *prometheus.CounterVec
	redisRebuilds  prometheus.Counter
	pendingChecks  prometheus.Gauge
	pendingDropped prometheus.Counter
	overRecounts   prometheus.Counter // recounts of a batch's over-issue the coupons did not show yet
	leader         prometheus.Gauge
	leaderEpoch    prometheus.Gauge
	leaderTerms    prometheus.Counter
	bootstraps     prometheus.Counter
	releases       prometheus.Counter

	// passes of the chores, by result (ok, error)
	releaseRuns    *prometheus.CounterVec
	quotaRuleRuns  *prometheus.CounterVec
	correctionRuns *prometheus.CounterVec
	mailRuns       *prometheus.CounterVec
	mailRows       prometheus.Gauge       // this source's mail to the judge not pruned yet
	peerErrors     *prometheus.CounterVec // look-ups on a peer source that failed, by peer
	restarts       *prometheus.CounterVec // starts over from the checkpoint without a takeover, by reason
}

func newMetrics(r prometheus.Registerer) *metrics {
	f := promauto.With(r)
	m := &metrics{}
	m.tailMetrics(f)
	m.checkMetrics(f)
	m.redisMetrics(f)
	m.leaderMetrics(f)
	m.choreMetrics(f)
	return m
}

// tailMetrics registers the metrics of the binlog tail: what it applies,
// how far behind it is, and how often it starts over.
func (m *metrics) tailMetrics(f promauto.Factory) {
	m.events = f.NewCounterVec(prometheus.CounterOpts{
		Name: "couponlink_cdc_events_total", Help: "Row changes of the source tables applied, by table and kind (insert, update, delete).",
	}, []string{"table", "kind"})
	m.lag = f.NewGauge(prometheus.GaugeOpts{
		Name: "couponlink_cdc_lag_seconds", Help: "Now minus the binlog time of the last applied event; ~0 when caught up (heartbeat); growing while the cdc is stalled.",
	})
	m.stalled = f.NewGauge(prometheus.GaugeOpts{
		Name: "couponlink_cdc_stalled", Help: "1 while the saved checkpoint is behind the server's binlog end and has not moved for -stall-after.",
	})
	m.batchDuration = f.NewHistogram(prometheus.HistogramOpts{
		Name: "couponlink_cdc_batch_duration_seconds", Help: "Time to apply one batch: counters + checkpoint transaction and Redis.",
		Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5},
	})
	m.batchRows = f.NewHistogram(prometheus.HistogramOpts{
		Name: "couponlink_cdc_batch_rows", Help: "Row changes per applied batch.",
		Buckets: prometheus.ExponentialBuckets(1, 4, 8),
	})
	m.checkpointTime = f.NewGauge(prometheus.GaugeOpts{
		Name: "couponlink_cdc_checkpoint_timestamp_seconds", Help: "Binlog time of the last event the saved checkpoint covers (unix seconds).",
	})
	m.restarts = f.NewCounterVec(prometheus.CounterOpts{
		Name: "couponlink_cdc_restarts_total", Help: "Times this cdc started its binlog tail over from the checkpoint after a failure, by reason (deadlock, connection, error: it kept the leader lock and its epoch; lock_lost: the lock's connection failed, it takes the lock again under a new epoch); a takeover by another cdc is not one; 0 in a healthy run.",
	}, []string{"reason"})
	for _, reason := range restartReasons {
		m.restarts.WithLabelValues(reason)
	}
}

// checkMetrics registers the metrics of the checks of what the tail
// applies: anomalies and the redemption checks awaiting their grace
// period.
func (m *metrics) checkMetrics(f promauto.Factory) {
	m.anomalies = f.NewCounterVec(prometheus.CounterOpts{
		Name: "couponlink_anomalies_total", Help: "Anomalies seen in the binlog, by kind.",
	}, []string{"kind"})
	m.pendingChecks = f.NewGauge(prometheus.GaugeOpts{
		Name: "couponlink_cdc_pending_redemption_checks", Help: "Checks of redemption evidence awaiting the grace period: coupons that became USED whose redemption row is awaited, and (evidence order_table) users whose USED coupons and orders of a template differ.",
	})
	m.pendingDropped = f.NewCounter(prometheus.CounterOpts{
		Name: "couponlink_cdc_pending_redemption_checks_dropped_total", Help: "USED coupons not checked for a redemption row because the pending list was full.",
	})
	m.overRecounts = f.NewCounter(prometheus.CounterOpts{
		Name: "couponlink_cdc_over_issue_recounts_total", Help: "Recounts of a batch's over-issue that the coupons did not show yet (a commit read in the binlog before its rows are visible, or drifted counters, which stay unconfirmed); each waits a few ms.",
	})
	for _, k := range inventory.AnomalyKinds {
		m.anomalies.WithLabelValues(k)
	}
}

// redisMetrics registers the metrics of the Redis stock keys the cdc
// writes.
func (m *metrics) redisMetrics(f promauto.Factory) {
	m.redisBehind = f.NewGauge(prometheus.GaugeOpts{
		Name: "couponlink_redis_behind_batches", Help: "Batches applied to MySQL whose Redis stock writes have not happened yet (0: Redis is current).",
	})
	m.redisWrites = f.NewCounterVec(prometheus.CounterOpts{
		Name: "couponlink_redis_writes_total", Help: "Redis write rounds, by kind of key (stock, claimed) and result (ok, error).",
	}, []string{"kind", "result"})
	m.redisRebuilds = f.NewCounter(prometheus.CounterOpts{
		Name: "couponlink_redis_rebuilds_total", Help: "Full rebuilds of the Redis stock keys and claimed-users sets (after a flush, a restart or an outage).",
	})
	for _, kind := range []string{kindStock, kindClaimed} {
		m.redisWrites.WithLabelValues(kind, "ok")
		m.redisWrites.WithLabelValues(kind, "error")
	}
}

// leaderMetrics registers the metrics of leadership of the checkpoint and
// the rebuilds of the counters.
func (m *metrics) leaderMetrics(f promauto.Factory) {
	m.leader = f.NewGauge(prometheus.GaugeOpts{
		Name: "couponlink_cdc_leader", Help: "1 while this cdc holds the leader lock and applies the binlog.",
	})
	m.leaderEpoch = f.NewGauge(prometheus.GaugeOpts{
		Name: "couponlink_cdc_leader_epoch", Help: "The checkpoint's epoch this cdc leads under (it grows by one at every change of leader); 0 while it is a standby.",
	})
	m.leaderTerms = f.NewCounter(prometheus.CounterOpts{
		Name: "couponlink_cdc_leader_terms_total", Help: "Times this cdc took the lead (the checkpoint's epoch): its first start, a takeover from another cdc, a start after its lock's connection failed (a restart of the tail that kept the lock keeps its epoch: couponlink_cdc_restarts_total).",
	})
	m.bootstraps = f.NewCounter(prometheus.CounterOpts{
		Name: "couponlink_cdc_bootstraps_total", Help: "Rebuilds of the counters from a consistent snapshot (the first start, or -rebuild).",
	})
}

// choreMetrics registers the metrics of the chores beside the tail
// (release, rule, corrections, the sources' mail) and their look-ups on
// peers.
func (m *metrics) choreMetrics(f promauto.Factory) {
	m.releases = f.NewCounter(prometheus.CounterOpts{
		Name: "couponlink_cdc_releases_total", Help: "Slots given back to their channel buckets (void, refund-recycle, expiry under the release policy).",
	})
	m.releaseRuns = f.NewCounterVec(prometheus.CounterOpts{
		Name: "couponlink_cdc_release_runs_total", Help: "Passes of the release chore (slots of expired coupons whose cooldown is over go back to their buckets), by result (ok; error: retried at the next tick).",
	}, []string{"result"})
	m.quotaRuleRuns = f.NewCounterVec(prometheus.CounterOpts{
		Name: "couponlink_quota_rule_runs_total", Help: "Passes of the rebalancing rule over every template, by result (ok; error: a template's decision or the policies could not be read, retried next pass).",
	}, []string{"result"})
	m.correctionRuns = f.NewCounterVec(prometheus.CounterOpts{
		Name: "couponlink_cdc_correction_checks_total", Help: "Looks at correction_log for corrections of the counters made outside the cdc (the cdc's mirror reloads after one), by result (ok; error: retried at the next tick).",
	}, []string{"result"})
	m.mailRuns = f.NewCounterVec(prometheus.CounterOpts{
		Name: "couponlink_cdc_sources_mail_prune_runs_total", Help: "Passes of the mail chore of a source in a sources: mapping (its rows of cdc_sources_mail the judge has decided are deleted), by result (ok; error: retried at the next tick).",
	}, []string{"result"})
	m.mailRows = f.NewGauge(prometheus.GaugeOpts{
		Name: "couponlink_cdc_sources_mail_rows", Help: "This source's rows of cdc_sources_mail (write-offs another source also holds, mailed to the judge) not pruned yet: growing while the judge is down or cannot read them, 0 once it has decided them all.",
	})
	m.peerErrors = f.NewCounterVec(prometheus.CounterOpts{
		Name: "couponlink_cdc_peer_errors_total", Help: "Look-ups on another source of the mapping (a redemption row on another server than its coupon) that failed, by peer; the checks that need the peer wait for it.",
	}, []string{"peer"})
	for _, runs := range []*prometheus.CounterVec{m.releaseRuns, m.quotaRuleRuns, m.correctionRuns, m.mailRuns} {
		runs.WithLabelValues("ok")
		runs.WithLabelValues("error")
	}
}

func newInventoryCollector(s *Sink) inventoryCollector {
	return inventoryCollector{s: s, desc: prometheus.NewDesc("couponlink_inventory",
		"Derived inventory per template and channel at the checkpoint, by state (quota, claimable, held, used, expired, returned, released, frozen); only the most recently active templates (200 by default).",
		[]string{"template", "channel", "state"}, nil),
		rate: prometheus.NewDesc("couponlink_redemption_rate",
			"Redemption rate per template and channel at the checkpoint: used / (claimed - released); only the most recently active templates (200 by default).",
			[]string{"template", "channel"}, nil),
		over: prometheus.NewDesc("couponlink_over_issued",
			"How many channel buckets hold more coupons (held+used+frozen) than their quota at the checkpoint, over every template (a legacy template without channel buckets counts as one bucket, against its budget); also the over-issues a bootstrap found.",
			nil, nil)}
}

// inventoryCollector exports couponlink_inventory{template,channel,state}
// from the sink's mirror. To cap the label set it exports only the
// MaxLabelTemplates most recently active templates (touched by the binlog).
type inventoryCollector struct {
	s    *Sink
	desc *prometheus.Desc
	rate *prometheus.Desc
	over *prometheus.Desc
}

func (c inventoryCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	ch <- c.rate
	ch <- c.over
}

func (c inventoryCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	type act struct {
		tpl int64
		at  time.Time
	}
	active := make([]act, 0, len(s.active))
	for t, at := range s.active {
		active = append(active, act{t, at})
	}
	sort.Slice(active, func(i, j int) bool { return active[i].at.After(active[j].at) })
	if len(active) > s.cfg.MaxLabelTemplates {
		active = active[:s.cfg.MaxLabelTemplates]
	}
	keep := map[int64]bool{}
	for _, a := range active {
		keep[a.tpl] = true
	}
	emit := func(p inventory.Pair, state string, v int64) {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(v),
			strconv.FormatInt(p.Template, 10), p.Channel, state)
	}
	for p, n := range s.counts {
		if !keep[p.Template] {
			continue
		}
		emit(p, "held", n.Held)
		emit(p, "used", n.Used)
		emit(p, "expired", n.Expired)
		emit(p, "returned", n.Returned)
		emit(p, "released", n.Released)
		emit(p, "frozen", n.Frozen())
		if r, ok := quota.Rate(n.Used, n.Issued(), n.Released); ok {
			ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, r, strconv.FormatInt(p.Template, 10), p.Channel)
		}
		if q, ok := s.quotas[p]; ok {
			emit(p, "quota", q.Quota)
			emit(p, "claimable", q.Claimable())
		}
	}
	ch <- prometheus.MustNewConstMetric(c.over, prometheus.GaugeValue, float64(s.overIssuedNow()))
}
