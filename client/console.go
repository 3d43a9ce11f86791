package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The calls of the operator console's routes: the templates list, a
// template's policy history and a user's coupons, the reconcile passes
// and where the cdc stands. All are GETs (retried) but ResolveTask.

// TemplatesQuery selects a page of ListTemplates; zero values are the
// API's defaults (no search, from the first, 50 a page).
type TemplatesQuery struct {
	Search string // name contains it (without case), or id is it
	After  int64  // the NextAfter of the page before
	Limit  int    // 1 to 500
}

// ListTemplates is GET /v1/templates: a page of templates by id. Page on
// with After = NextAfter until it is 0.
func (c *Client) ListTemplates(ctx context.Context, q TemplatesQuery) (TemplatePage, error) {
	v := url.Values{}
	if q.Search != "" {
		v.Set("q", q.Search)
	}
	if q.After > 0 {
		v.Set("after", strconv.FormatInt(q.After, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out TemplatePage
	err := c.call(ctx, http.MethodGet, withQuery("/v1/templates", v), nil, &out, true)
	return out, err
}

// QuotaPolicyHistory is GET /v1/templates/{id}/quota-policy/history: the
// template's policy changes, newest first, at most limit (0: the API's
// default, 20).
func (c *Client) QuotaPolicyHistory(ctx context.Context, templateID int64, limit int) (PolicyHistory, error) {
	var out PolicyHistory
	err := c.call(ctx, http.MethodGet, withQuery(quotaPolicyPath(templateID)+"/history", limitQuery(limit)), nil, &out, true)
	return out, err
}

// UserCoupons is GET /v1/templates/{id}/user-coupons: the user's coupons
// of the template, each with its history.
func (c *Client) UserCoupons(ctx context.Context, templateID int64, userID string) (UserCoupons, error) {
	var out UserCoupons
	path := withQuery(fmt.Sprintf("/v1/templates/%d/user-coupons", templateID), url.Values{"user_id": {userID}})
	err := c.call(ctx, http.MethodGet, path, nil, &out, true)
	return out, err
}

// ReconcileTasks is GET /v1/reconcile/tasks: the last passes (at most
// limit; 0: the API's default, 20), newest first, and the open items.
func (c *Client) ReconcileTasks(ctx context.Context, limit int) (ReconcileTasks, error) {
	var out ReconcileTasks
	err := c.call(ctx, http.MethodGet, withQuery("/v1/reconcile/tasks", limitQuery(limit)), nil, &out, true)
	return out, err
}

// ResolveTask is POST /v1/reconcile/tasks/{id}/resolve. Not retried: a
// repeat after a lost answer is 409 not_open (IsCode(err, CodeNotOpen)).
func (c *Client) ResolveTask(ctx context.Context, taskID int64, operator, note string) (Resolved, error) {
	var out Resolved
	body := map[string]string{"operator": operator, "note": note}
	err := c.call(ctx, http.MethodPost, fmt.Sprintf("/v1/reconcile/tasks/%d/resolve", taskID), body, &out, false)
	return out, err
}

// CDCStatus is GET /v1/cdc/status.
func (c *Client) CDCStatus(ctx context.Context) (CDCStatus, error) {
	var out CDCStatus
	err := c.call(ctx, http.MethodGet, "/v1/cdc/status", nil, &out, true)
	return out, err
}

func limitQuery(limit int) url.Values {
	if limit <= 0 {
		return nil
	}
	return url.Values{"limit": {strconv.Itoa(limit)}}
}

func withQuery(path string, v url.Values) string {
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// TemplateSummary is a template as the console's campaigns page shows it.
type TemplateSummary struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	TotalQuota int64  `json:"total_quota"`
	Counts
	RedemptionRate *float64 `json:"redemption_rate"` // nil while nothing is held or used
	Anomalies      int64    `json:"anomalies"`
	Reconcile      string   `json:"reconcile"` // needs_review, clean, auto_fixed, error or none
}

// TemplatePage is the answer of ListTemplates; NextAfter 0: the last page.
type TemplatePage struct {
	Templates []TemplateSummary `json:"templates"`
	NextAfter int64             `json:"next_after"`
}

// PolicyChangeEntry is one audited change of a template's override;
// Before nil: there was none, After nil: it was dropped.
type PolicyChangeEntry struct {
	ID        int64     `json:"id"`
	Template  int64     `json:"template"`
	Version   int64     `json:"version"`
	Action    string    `json:"action"`
	Before    *Override `json:"before"`
	After     *Override `json:"after"`
	ChangedBy string    `json:"changed_by"`
	Reason    string    `json:"reason"`
	Source    string    `json:"source"`
	At        time.Time `json:"at"`
}

// PolicyHistory is the answer of QuotaPolicyHistory.
type PolicyHistory struct {
	Template int64               `json:"template"`
	Entries  []PolicyChangeEntry `json:"entries"`
}

// UserCoupons is the answer of UserCoupons.
type UserCoupons struct {
	Template int64     `json:"template"`
	UserID   string    `json:"user_id"`
	Coupons  []History `json:"coupons"`
}

// ReconcilePass is a reconcile pass; Status is running, clean,
// auto_fixed, needs_review or error.
type ReconcilePass struct {
	TaskID       int64      `json:"task_id"`
	StartedAt    time.Time  `json:"started_at"`
	FinishedAt   *time.Time `json:"finished_at"`
	Status       string     `json:"status"`
	Summary      string     `json:"summary"`
	Position     string     `json:"position,omitempty"`
	ResolvedAt   *time.Time `json:"resolved_at,omitempty"`
	ResolvedBy   string     `json:"resolved_by,omitempty"`
	ResolvedNote string     `json:"resolved_note,omitempty"`
}

// ReconcileDifference is a difference a pass left for a person; Found nil:
// missing, or not an integer (FoundRaw).
type ReconcileDifference struct {
	Store    string `json:"store"`
	Target   string `json:"target"`
	Template int64  `json:"template"`
	Channel  string `json:"channel,omitempty"`
	Field    string `json:"field,omitempty"`
	Expected int64  `json:"expected"`
	Found    *int64 `json:"found"`
	FoundRaw string `json:"found_raw,omitempty"`
	Action   string `json:"action"`
	Reason   string `json:"reason,omitempty"`
	Source   string `json:"source,omitempty"`
}

// ReconcileOpenItem is a pass that needs review and is not resolved.
type ReconcileOpenItem struct {
	TaskID      int64                 `json:"task_id"`
	StartedAt   time.Time             `json:"started_at"`
	Summary     string                `json:"summary"`
	Differences []ReconcileDifference `json:"differences"`
}

// ReconcileTasks is the answer of ReconcileTasks.
type ReconcileTasks struct {
	Passes []ReconcilePass     `json:"passes"`
	Open   []ReconcileOpenItem `json:"open"`
}

// Resolved is the answer of ResolveTask.
type Resolved struct {
	TaskID     int64  `json:"task_id"`
	ResolvedBy string `json:"resolved_by"`
	Note       string `json:"note"`
}

// CDCStatus is the answer of CDCStatus: where the cdc stands, its
// process's gauges and the last reconcile pass (nil before the first).
type CDCStatus struct {
	CDCPosition
	ServerPosition string           `json:"server_position"`
	LagSeconds     float64          `json:"lag_seconds"`
	Leader         string           `json:"leader,omitempty"`
	Epoch          int64            `json:"epoch"`
	EventsApplied  int64            `json:"events_applied"`
	Batches        int64            `json:"batches"`
	BootstrappedAt *time.Time       `json:"bootstrapped_at,omitempty"`
	Anomalies      map[string]int64 `json:"anomalies"`
	Webhooks       Outbox           `json:"webhooks"`
	Process        CDCProcess       `json:"process"`
	LastReconcile  *ReconcilePass   `json:"last_reconcile"`
}

// Outbox is the webhook outbox's events by status.
type Outbox struct {
	Pending       int64      `json:"pending"`
	Delivered     int64      `json:"delivered"`
	Dropped       int64      `json:"dropped"`
	Failing       int64      `json:"failing"` // pending events whose delivery failed at least once
	OldestPending *time.Time `json:"oldest_pending,omitempty"`
}

// CDCProcess is what the cdc's /metrics say; Reachable false: they could
// not be read (Error says why) and the gauges are nil.
type CDCProcess struct {
	MetricsURL         string   `json:"metrics_url,omitempty"`
	Reachable          bool     `json:"reachable"`
	Error              string   `json:"error,omitempty"`
	Leader             *float64 `json:"leader"`
	RedisBehindBatches *float64 `json:"redis_behind_batches"`
	LagSeconds         *float64 `json:"lag_seconds"`
}
