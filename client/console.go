package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/couponlink/couponlink/api"
)

// The calls of the operator console's routes: the templates list, a
// template's policy history and a user's coupons, the reconcile passes
// and where the cdc stands, the findings. All are GETs (retried) but
// ResolveTask, AckFinding, CloseFinding, ReopenFinding and
// PreviewQuotaPolicy.

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

// Trends is GET /v1/templates/{id}/trends: claims, redemptions and
// releases per minute and channel over the last hours (0: the API's
// default, 3; at most 24).
func (c *Client) Trends(ctx context.Context, templateID int64, hours int) (Trends, error) {
	var out Trends
	var v url.Values
	if hours > 0 {
		v = url.Values{"hours": {strconv.Itoa(hours)}}
	}
	err := c.call(ctx, http.MethodGet, withQuery(fmt.Sprintf("/v1/templates/%d/trends", templateID), v), nil, &out, true)
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
	body := api.ResolveRequest{Operator: operator, Note: note}
	err := c.call(ctx, http.MethodPost, fmt.Sprintf("/v1/reconcile/tasks/%d/resolve", taskID), body, &out, false)
	return out, err
}

// FindingsQuery selects the findings of Findings; zero values are the
// API's defaults (every state and source, 100).
type FindingsQuery struct {
	State    string // open, acknowledged or closed
	Source   string // cdc or reconcile
	Kind     string // an anomaly's kind; a difference's store/field
	Template int64  // only those naming this template
	Limit    int    // 1 to 1000
}

// Findings is GET /v1/findings: the findings, the last seen first.
func (c *Client) Findings(ctx context.Context, q FindingsQuery) (Findings, error) {
	v := url.Values{}
	if q.State != "" {
		v.Set("state", q.State)
	}
	if q.Source != "" {
		v.Set("source", q.Source)
	}
	if q.Kind != "" {
		v.Set("kind", q.Kind)
	}
	if q.Template > 0 {
		v.Set("template", strconv.FormatInt(q.Template, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out Findings
	err := c.call(ctx, http.MethodGet, withQuery("/v1/findings", v), nil, &out, true)
	return out, err
}

// AckFinding is POST /v1/findings/{fingerprint}/ack. Not retried: a repeat
// after a lost answer is 409 not_open (IsCode(err, CodeNotOpen)).
func (c *Client) AckFinding(ctx context.Context, fingerprint, operator, reason string) (Finding, error) {
	return c.moveFinding(ctx, fingerprint, "ack", operator, reason)
}

// CloseFinding is POST /v1/findings/{fingerprint}/close. Not retried, as
// AckFinding.
func (c *Client) CloseFinding(ctx context.Context, fingerprint, operator, reason string) (Finding, error) {
	return c.moveFinding(ctx, fingerprint, "close", operator, reason)
}

// ReopenFinding is POST /v1/findings/{fingerprint}/reopen: an
// acknowledged or closed finding is open again. Not retried, as
// AckFinding.
func (c *Client) ReopenFinding(ctx context.Context, fingerprint, operator, reason string) (Finding, error) {
	return c.moveFinding(ctx, fingerprint, "reopen", operator, reason)
}

// PreviewQuotaPolicy is POST /v1/templates/{id}/quota-policy/preview: what
// the rebalancing rule would decide now with change over the policy in
// force (an empty change: the policy in force). Nothing is saved; it is
// retried like a read.
func (c *Client) PreviewQuotaPolicy(ctx context.Context, templateID int64, change Override) (PolicyPreview, error) {
	var out PolicyPreview
	err := c.call(ctx, http.MethodPost, quotaPolicyPath(templateID)+"/preview", change, &out, true)
	return out, err
}

// Legacy is GET /v1/legacy: the legacy shop's campaigns, read-only (an
// API started with -mapping; IsCode(err, CodeNotFound) without one).
func (c *Client) Legacy(ctx context.Context) (LegacyStatus, error) {
	var out LegacyStatus
	err := c.call(ctx, http.MethodGet, "/v1/legacy", nil, &out, true)
	return out, err
}

// LegacyTemplate is GET /v1/legacy/templates/{id}: one template of the
// legacy shop.
func (c *Client) LegacyTemplate(ctx context.Context, id int64) (LegacyStatus, error) {
	var out LegacyStatus
	err := c.call(ctx, http.MethodGet, "/v1/legacy/templates/"+strconv.FormatInt(id, 10), nil, &out, true)
	return out, err
}

// LegacyQuotaPolicy is GET /v1/legacy/templates/{id}/quota-policy: a
// legacy campaign's policy (modes off and signal only: couponlink never
// writes the shop's tables; an inherited auto is in force as signal).
func (c *Client) LegacyQuotaPolicy(ctx context.Context, templateID int64) (PolicyView, error) {
	var out PolicyView
	err := c.call(ctx, http.MethodGet, legacyPolicyPath(templateID), nil, &out, true)
	return out, err
}

// SetLegacyQuotaPolicy is PUT /v1/legacy/templates/{id}/quota-policy. Not
// retried; mode auto is refused (IsCode(err, CodeLegacyPolicyRefused)).
func (c *Client) SetLegacyQuotaPolicy(ctx context.Context, templateID int64, ch PolicyChange) (PolicyView, error) {
	var out PolicyView
	err := c.call(ctx, http.MethodPut, legacyPolicyPath(templateID), ch, &out, false)
	return out, err
}

// PreviewLegacyQuotaPolicy is POST
// /v1/legacy/templates/{id}/quota-policy/preview: what the cdc's rule
// would recommend now for a legacy campaign with change over its policy
// (nothing is saved; Unknown says what the mapping cannot show).
func (c *Client) PreviewLegacyQuotaPolicy(ctx context.Context, templateID int64, change Override) (PolicyPreview, error) {
	var out PolicyPreview
	err := c.call(ctx, http.MethodPost, legacyPolicyPath(templateID)+"/preview", change, &out, true)
	return out, err
}

// ResetLegacyQuotaPolicy is DELETE /v1/legacy/templates/{id}/quota-policy:
// the legacy campaign follows the defaults again. Not retried.
func (c *Client) ResetLegacyQuotaPolicy(ctx context.Context, templateID int64, changedBy, reason string) (PolicyView, error) {
	var out PolicyView
	path := withQuery(legacyPolicyPath(templateID), url.Values{"changed_by": {changedBy}, "reason": {reason}})
	err := c.call(ctx, http.MethodDelete, path, nil, &out, false)
	return out, err
}

// LegacyQuotaPolicyHistory is GET
// /v1/legacy/templates/{id}/quota-policy/history: a legacy campaign's
// policy changes, newest first, at most limit (0: the API's default, 20).
func (c *Client) LegacyQuotaPolicyHistory(ctx context.Context, templateID int64, limit int) (PolicyHistory, error) {
	var out PolicyHistory
	err := c.call(ctx, http.MethodGet, withQuery(legacyPolicyPath(templateID)+"/history", limitQuery(limit)), nil, &out, true)
	return out, err
}

func legacyPolicyPath(templateID int64) string {
	return fmt.Sprintf("/v1/legacy/templates/%d/quota-policy", templateID)
}

func (c *Client) moveFinding(ctx context.Context, fingerprint, verb, operator, reason string) (Finding, error) {
	var out Finding
	body := api.FindingRequest{Operator: operator, Reason: reason}
	err := c.call(ctx, http.MethodPost, "/v1/findings/"+url.PathEscape(fingerprint)+"/"+verb, body, &out, false)
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

// The answers of the console's routes (package api has their fields).
type (
	TemplateSummary     = api.TemplateSummary     // a template as the console's campaigns page shows it
	TemplatePage        = api.TemplatePage        // the answer of ListTemplates; NextAfter 0: the last page
	PolicyChangeEntry   = api.PolicyChangeEntry   // one audited change of a template's override
	PolicyHistory       = api.PolicyHistory       // the answer of QuotaPolicyHistory
	UserCoupons         = api.UserCoupons         // the answer of UserCoupons
	ReconcilePass       = api.ReconcilePass       // a reconcile pass
	ReconcileDifference = api.ReconcileDifference // a difference a pass left for a person
	ReconcileOpenItem   = api.ReconcileOpenItem   // a pass that needs review and is not resolved
	ReconcileTasks      = api.ReconcileTasks      // the answer of ReconcileTasks
	Resolved            = api.Resolved            // the answer of ResolveTask
	CDCStatus           = api.CDCStatus           // the answer of CDCStatus
	Finding             = api.Finding             // a finding and where its lifecycle stands
	Findings            = api.Findings            // the answer of Findings
	Outbox              = api.Outbox              // the webhook outbox's events by status
	CDCProcess          = api.CDCProcess          // what the cdc's /metrics say
	PolicyPreview       = api.PolicyPreview       // the answer of PreviewQuotaPolicy
	LegacyStatus        = api.LegacyStatus        // the answer of Legacy and LegacyTemplate
	Trends              = api.Trends              // the answer of Trends
	ChannelTrend        = api.ChannelTrend        // one channel's counts per minute
)
