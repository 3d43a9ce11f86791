package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/couponlink/couponlink/client"
)

// The API runs of phase 4 with the write combiners (issue 15) on and off:
// the same load through two `couponlink api` processes, the mean group
// size the combiner made (from its couponlink_api_*_group_size histogram)
// and the bare multi-row INSERT ceiling of that group size, and the cdc's
// lag while the combined hot-bucket load runs.

// combinedRun is one load through the API with its combiners on and off.
type combinedRun struct {
	on, off          loadResult
	groups, requests float64    // groups the on process ran during its run, and requests in them
	multiRows        int        // rows per INSERT of the multi-row ceiling: the mean group size, rounded
	multi            loadResult // the multi-row INSERT ceiling (its rate in statements/s)
}

func (c combinedRun) groupSize() float64 {
	if c.groups == 0 {
		return 0
	}
	return c.requests / c.groups
}

// multiRowRate is the multi-row ceiling in rows per second.
func (c combinedRun) multiRowRate() float64 { return c.multi.rate() * float64(c.multiRows) }

// combined runs the load on the api with its combiners on, then off, and
// the multi-row INSERT ceiling of the mean group size of kind (claim,
// redemption) the first run made.
func (a *apiBench) combined(ctx context.Context, kind string, run func(p *apiProc) loadResult) combinedRun {
	var c combinedRun
	g0, r0 := a.groupStats(ctx, kind)
	c.on = run(a.on)
	g1, r1 := a.groupStats(ctx, kind)
	c.groups, c.requests = g1-g0, r1-r0
	c.off = run(a.off)
	c.multiRows = max(1, int(math.Round(c.groupSize())))
	c.multi = a.insertCeiling(ctx, fmt.Sprintf("%s groups", kind), c.multiRows)
	a.log.Info("combiner", "kind", kind, "groups", int(c.groups), "mean_group", fmt.Sprintf("%.1f", c.groupSize()),
		"on_per_s", int(c.on.rate()), "off_per_s", int(c.off.rate()), "multi_row_ceiling_rows_per_s", int(c.multiRowRate()))
	return c
}

var groupSeries = regexp.MustCompile(`(?m)^couponlink_api_(claim|redemption)_group_size_(sum|count) (\S+)$`)

// groupStats reads the combining api's group histogram of kind: groups
// run and requests in them (zeros when it cannot be read).
func (a *apiBench) groupStats(ctx context.Context, kind string) (groups, requests float64) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.on.metrics+"/metrics", nil)
	resp, err := a.client.Do(req)
	if err != nil {
		a.log.Warn("read the api's metrics", "err", err)
		return 0, 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return parseGroupStats(string(body), kind)
}

// parseGroupStats reads the groups and the requests in them of kind
// (claim, redemption) from the api's metrics text.
func parseGroupStats(metrics, kind string) (groups, requests float64) {
	for _, m := range groupSeries.FindAllStringSubmatch(metrics, -1) {
		if m[1] != kind {
			continue
		}
		v, _ := strconv.ParseFloat(m[3], 64)
		if m[2] == "count" {
			groups = v
		} else {
			requests = v
		}
	}
	return groups, requests
}

// lagAtLoad measures the cdc's lag (the in-process pipeline and the no-op
// reader of phase 3) while the combined api takes hot-bucket claims of tpl
// in the closed loop of the runs above.
func (a *apiBench) lagAtLoad(ctx context.Context, tpl int64) (*lagResult, error) {
	res := &lagResult{warm: min(time.Second, a.cfg.apiDuration/5)}
	a.log.Info("cdc lag at the combined API load", "duration", a.cfg.apiDuration)
	err := followLag(ctx, a.cfg, a.e, tpl, res, a.log, func() pacedLoad { return a.timedClaims(ctx, tpl) })
	res.target = int(res.load.rate())
	a.log.Info("lag at the combined API load", "claims_per_s", res.target, "counter_p50", res.counter.P50, "counter_p99", res.counter.P99,
		"redis_p99", res.redis.P99, "noop_p99", res.noop.P99, "missing", res.missing)
	return res, err
}

// timedClaims is the combined api's hot-bucket claim load, each claim's
// coupon id kept with the time its answer came back.
func (a *apiBench) timedClaims(ctx context.Context, tpl int64) pacedLoad {
	var mu sync.Mutex
	out := pacedLoad{start: time.Now()}
	r := a.load(ctx, a.on, func(ctx context.Context, cl, i int) error {
		id := fmt.Sprintf("lag-%d-%d", cl, i)
		c, err := a.on.api.Claim(ctx, client.ClaimRequest{TemplateID: tpl, UserID: id, Channel: "hot", RequestID: id})
		err = fresh(err, c.Replayed, "claim "+id)
		if err == nil {
			at := time.Now()
			mu.Lock()
			out.commits = append(out.commits, commit{c.UserCouponID, at})
			mu.Unlock()
		}
		return err
	})
	out.took = time.Since(out.start)
	out.errors = int64(r.Errors)
	if r.FirstErr != "" {
		out.firstErr = fmt.Errorf("%s", r.FirstErr)
	}
	return out
}
