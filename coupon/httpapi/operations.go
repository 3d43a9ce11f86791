package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/redact"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/reconcile"
)

// The operations routes of the console: reconcile passes and open items,
// resolving one, and where the cdc stands.

// reconcileTasks is GET /v1/reconcile/tasks?limit=: the last passes,
// newest first, and the open items needing review, oldest first.
func (s *Server) reconcileTasks(w http.ResponseWriter, r *http.Request) (int, any, error) {
	limit, err := queryInt(r, "limit", 20, 1, 200)
	if err != nil {
		return 0, nil, err
	}
	passes, err := reconcile.RecentPasses(r.Context(), s.store.DB(), int(limit))
	if err != nil {
		return 0, nil, err
	}
	open, err := reconcile.ListOpen(r.Context(), s.store.DB())
	if err != nil {
		return 0, nil, err
	}
	if open == nil {
		open = []reconcile.OpenItem{}
	}
	return http.StatusOK, api.ReconcileTasks{Passes: passes, Open: open}, nil
}

// resolveTask is POST /v1/reconcile/tasks/{id}/resolve: closes an open
// item with a note, as `couponlink reconcile -resolve` does.
func (s *Server) resolveTask(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	var b api.ResolveRequest
	if err := decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	b.Operator, b.Note = strings.TrimSpace(b.Operator), strings.TrimSpace(b.Note)
	switch {
	case b.Operator == "":
		return 0, nil, coupon.Invalid("operator", "operator is required: who resolves the item")
	case len(b.Operator) > 64:
		return 0, nil, coupon.Invalid("operator", "operator must be at most 64 bytes, got %d", len(b.Operator))
	case b.Note == "":
		return 0, nil, coupon.Invalid("note", "note is required: say what was checked or done")
	}
	if err := reconcile.Resolve(r.Context(), s.store.DB(), id, b.Operator, b.Note, identity(r)); err != nil {
		if errors.Is(err, reconcile.ErrNotOpen) {
			return 0, nil, &coupon.Error{Code: api.CodeNotOpen, Field: "id",
				Message: fmt.Sprintf("reconcile task %d is not open: it does not exist, did not need review, or was resolved; nothing was written", id)}
		}
		return 0, nil, err
	}
	who, behalf := coupon.Acting(b.Operator, identity(r))
	return http.StatusOK, api.Resolved{TaskID: id, ResolvedBy: who, OnBehalfOf: behalf, Note: b.Note}, nil
}

// cdcStatus is GET /v1/cdc/status: where the cdc stands (as `couponlink
// status -json` shows it), the cdc's own gauges when its metrics answer,
// and the last reconcile pass.
func (s *Server) cdcStatus(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if _, err := query(r); err != nil {
		return 0, nil, err
	}
	name := s.checkpoint()
	db := s.store.DB()
	st, err := inventory.ReadStatus(r.Context(), db, name)
	if err != nil {
		return 0, nil, err
	}
	v := api.CDCStatus{CDCState: inventory.CDCStatusOf(name, st)}
	passes, err := reconcile.RecentPasses(r.Context(), db, 1)
	if err != nil {
		return 0, nil, err
	}
	if len(passes) > 0 {
		v.LastReconcile = &passes[0]
	}
	v.Process = s.readCDCMetrics(r.Context(), name)
	return http.StatusOK, v, nil
}

// cdcMetricsURL is where the cdc's /metrics are: Config.CDCMetricsURL
// when set, else the address the checkpoint's leading cdc recorded
// (cdc_process); "" with why when neither says.
func (s *Server) cdcMetricsURL(ctx context.Context, checkpoint string) (url, missing string) {
	if s.cfg.CDCMetricsURL != "" {
		return s.cfg.CDCMetricsURL, ""
	}
	url, err := inventory.LeaderMetricsURL(ctx, s.store.DB(), checkpoint)
	switch {
	case err != nil:
		s.log.Warn("read the cdc's metrics address", "err", err)
		return "", "the cdc's recorded metrics address cannot be read (see the API's log); set COUPONLINK_CDC_METRICS_URL"
	case url == "":
		return "", fmt.Sprintf("the leader of checkpoint %q recorded no metrics address (it runs without -metrics-addr, "+
			"or has not started); set COUPONLINK_CDC_METRICS_URL to its /metrics", checkpoint)
	}
	return url, ""
}

// checkpoint is the name of the cdc checkpoint the API shows.
func (s *Server) checkpoint() string {
	if s.cfg.Inventory.Checkpoint == "" {
		return "default"
	}
	return s.cfg.Inventory.Checkpoint
}

// readCDCMetrics reads the cdc's gauges from its /metrics (cdcMetricsURL).
func (s *Server) readCDCMetrics(ctx context.Context, checkpoint string) api.CDCProcess {
	var p api.CDCProcess
	u, missing := s.cdcMetricsURL(ctx, checkpoint)
	// what a viewer sees: a password or token= in the URL masked
	p.MetricsURL, p.Error = redact.String(u), missing
	if u == "" {
		return p
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		p.Error = redact.Text(err.Error())
		return p
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.Error = "the cdc's metrics do not answer"
		s.log.Debug("read cdc metrics", "url", p.MetricsURL, "err", err)
		return p
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		p.Error = "the cdc's metrics answered " + resp.Status
		return p
	}
	p.Reachable = true
	gauges := map[string]**float64{"couponlink_cdc_leader": &p.Leader, "couponlink_redis_behind_batches": &p.RedisBehindBatches,
		"couponlink_cdc_lag_seconds": &p.LagSeconds}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if dst := gauges[name]; ok && dst != nil {
			if f, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
				*dst = &f
			}
		}
	}
	return p
}
