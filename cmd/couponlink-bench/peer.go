package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/canal"
)

// The outside peer of row 1: wj596/go-mysql-transfer, a public Go
// binlog-to-Redis tool, given as a binary with -peer-transfer (the bench
// neither holds nor builds its code). It replays the whole backlog (from
// the start of the 1-row part, by file/offset, seeded with its -position
// command) into Redis DB peerRedisDB as one string key per user_coupon row
// (JSON of the row); a marker row inserted right after the catch-up phase
// ends the range: the run is over when the marker's key appears. A no-op
// canal reader over the same range, just before, is the ceiling.

const (
	peerRedisDB  = 2
	peerUser     = "bench_transfer"
	peerPassword = "bench-transfer-pw" // go-mysql-transfer refuses an empty password; loopback only
	peerPrefix   = "uc:"
)

type peerResult struct {
	rows        int64 // row changes of the source tables in the range (the no-op reader's count)
	keys        int64 // keys written (one per user_coupon row that exists at the end)
	wantKeys    int64
	took        time.Duration // process start → marker key
	stream      time.Duration // first key → marker key
	noop        readerRun
	from, to    canal.Position
	maxRSS      int64
	cpu         time.Duration
	bulk, procs int
}

func (p peerResult) rate() float64       { return float64(p.rows) / p.took.Seconds() }
func (p peerResult) streamRate() float64 { return float64(p.rows) / p.stream.Seconds() }

// runPeer runs go-mysql-transfer over the whole backlog, from the start of
// the 1-row part to a marker row, beside a no-op reader over that range.
func runPeer(ctx context.Context, cfg config, e *env, cu *catchupResult, log *slog.Logger) (*peerResult, error) {
	log.Info("peer: go-mysql-transfer over the whole backlog", "binary", cfg.peerTransfer)
	res := &peerResult{from: modeStart(cu.single.from, "file"), bulk: 100, procs: 4}
	marker, err := res.setRange(ctx, e, log)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(e.dir, "transfer-")
	if err != nil {
		return nil, err
	}
	confPath, err := res.writeConfig(e, dir)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: e.redisAddr, DB: peerRedisDB})
	defer rdb.Close()
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return nil, err
	}
	// seed its position
	pos := exec.CommandContext(ctx, cfg.peerTransfer, "-config", confPath, "-position", res.from.File, strconv.FormatUint(uint64(res.from.Pos), 10))
	pos.Dir, pos.Env = dir, cleanEnv()
	if out, err := pos.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go-mysql-transfer -position: %v: %s", err, out)
	}

	c, err := startProcess(cfg.peerTransfer, dir, filepath.Join(dir, "transfer.log"), "-config", confPath)
	if err != nil {
		return nil, fmt.Errorf("start go-mysql-transfer: %w", err)
	}
	defer c.stop()
	first, err := res.waitMarker(ctx, c, rdb, peerPrefix+strconv.FormatInt(marker, 10))
	if err != nil {
		return nil, err
	}
	end := time.Now()
	res.took, res.stream = end.Sub(c.started), end.Sub(first)
	res.cpu = procCPU(c.pid())
	res.keys, _ = rdb.DBSize(ctx).Result()
	log.Info("go-mysql-transfer reached the marker", "rows", res.rows, "took", res.took.Round(time.Millisecond),
		"rows_per_s", int(res.rate()), "stream_rows_per_s", int(res.streamRate()), "noop_rows_per_s", int(res.noop.rate), "keys", res.keys)
	return res, nil
}

// setRange grants the peer's MySQL user, ends the range with the marker
// row (the last user_coupon row of the range; its id is returned), counts
// the keys the peer should write, and times the no-op reader over the
// range: the ceiling.
func (res *peerResult) setRange(ctx context.Context, e *env, log *slog.Logger) (marker int64, err error) {
	for _, q := range []string{
		"CREATE USER IF NOT EXISTS '" + peerUser + "'@'127.0.0.1' IDENTIFIED BY '" + peerPassword + "'",
		"GRANT SELECT, RELOAD, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '" + peerUser + "'@'127.0.0.1'",
	} {
		if _, err := e.db.ExecContext(ctx, q); err != nil {
			return 0, fmt.Errorf("%s: %w", q, err)
		}
	}
	r, err := e.db.ExecContext(ctx, `INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at)
		VALUES (?, 'bench-peer-marker', 'c00', 1, NOW(6), NOW(6) + INTERVAL 90 DAY)`, e.backlogTpl)
	if err != nil {
		return 0, fmt.Errorf("insert the marker row: %w", err)
	}
	if marker, err = r.LastInsertId(); err != nil {
		return 0, err
	}
	if res.to, err = canal.CurrentPosition(ctx, e.db); err != nil {
		return 0, err
	}
	if err := e.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM user_coupon`).Scan(&res.wantKeys); err != nil {
		res.wantKeys = 0
	}
	if res.noop, err = timeNoop(ctx, e, []string{sourceRegex()}, res.from, res.to); err != nil {
		return 0, fmt.Errorf("no-op reader over the whole backlog: %w", err)
	}
	res.rows = res.noop.rows
	return marker, nil
}

// writeConfig writes the peer's app.yml into dir and returns its path.
func (res *peerResult) writeConfig(e *env, dir string) (string, error) {
	conf := fmt.Sprintf(`addr: 127.0.0.1:%d
user: %s
pass: %s
charset: utf8
slave_id: 7301
flavor: mariadb
data_dir: %s
logger:
  level: warn
maxprocs: %d
bulk_size: %d
enable_exporter: false
enable_web_admin: false
target: redis
redis_addrs: %s
redis_database: %d
rule:
  -
    schema: couponlink
    table: user_coupon
    value_encoder: json
    redis_structure: string
    redis_key_prefix: "%s"
`, e.mysqlPort, peerUser, peerPassword, filepath.Join(dir, "data"), res.procs, res.bulk, e.redisAddr, peerRedisDB, peerPrefix)
	confPath := filepath.Join(dir, "app.yml")
	return confPath, os.WriteFile(confPath, []byte(conf), 0o600)
}

// waitMarker polls Redis every 10 ms until the marker's key appears (for
// at most 10 minutes), noting when the first key appeared and the peer's
// highest VmRSS.
func (res *peerResult) waitMarker(ctx context.Context, c *child, rdb *redis.Client, markerKey string) (first time.Time, err error) {
	err = poll(ctx, 10*time.Millisecond, 10*time.Minute, func() (bool, error) {
		if first.IsZero() {
			if n, err := rdb.DBSize(ctx).Result(); err == nil && n > 0 {
				first = time.Now()
			}
		}
		if n, err := rdb.Exists(ctx, markerKey).Result(); err == nil && n == 1 {
			return true, nil
		}
		if rss, _, err := procMem(c.pid()); err == nil && rss > res.maxRSS {
			res.maxRSS = rss
		}
		if c.exited() != nil {
			return false, fmt.Errorf("go-mysql-transfer exited before the marker; its log ends with:\n%s", tail(c.log, 15))
		}
		return false, nil
	})
	if errors.Is(err, errTimedOut) {
		err = fmt.Errorf("go-mysql-transfer did not reach the marker in 10 minutes; its log ends with:\n%s", tail(c.log, 15))
	}
	return first, err
}

func (r *Report) peer(cfg config, p *peerResult) {
	const what = "CDC catch-up, peer: go-mysql-transfer (binlog → Redis), whole backlog (rows/s)"
	if p == nil {
		r.add(Row{ID: "1", What: what, Ours: "not run (give -peer-transfer /path/to/go-mysql-transfer)", Peer: "—", Ratio: "—", Target: "report", Settings: "—"})
		return
	}
	r.add(Row{ID: "1", What: what, Ours: rate(p.rate(), "rows/s") + " (go-mysql-transfer)",
		Peer:    rate(p.noop.rate, "rows/s") + " (no-op canal by file/offset over the same range, just before)",
		OursNum: p.rate(), PeerNum: p.noop.rate, Target: "report (seen 0.3–0.5 here before)",
		Settings: fmt.Sprintf("%s row changes of the source tables (no-op reader's count) from %s to %s (a marker row inserted after the catch-up phase ends the range; the range also holds the catch-up runs' own counter transactions); "+
			"go-mysql-transfer (-peer-transfer %s) started at that file/offset (its -position), one Redis string key per user_coupon row (JSON, prefix %q, Redis DB %d), bulk_size %d, maxprocs %d, log level warn, web admin and exporter off; "+
			"time from process start to the marker's key: %s (from its first key: %s, %s, ratio %.2f); keys at the end %s (rows in user_coupon: %s); CPU %s (%.1f µs per row); VmRSS max %s",
			count(p.rows), p.from, p.to, cfg.peerTransfer, peerPrefix, peerRedisDB, p.bulk, p.procs, sec(p.took), sec(p.stream), rate(p.streamRate(), "rows/s"), p.streamRate()/p.noop.rate,
			count(p.keys), count(p.wantKeys), sec(p.cpu), float64(p.cpu)/float64(time.Microsecond)/float64(max(1, p.rows)), mib(p.maxRSS))})
}
