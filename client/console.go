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
	setText(v, "q", q.Search)
	setCount(v, "after", q.After)
	setCount(v, "limit", q.Limit)
	return get[TemplatePage](ctx, c, withQuery("/v1/templates", v))
}

// QuotaPolicyHistory is GET /v1/templates/{id}/quota-policy/history: the
// template's policy changes, newest first, at most limit (0: the API's
// default, 20).
func (c *Client) QuotaPolicyHistory(ctx context.Context, templateID int64, limit int) (PolicyHistory, error) {
	return get[PolicyHistory](ctx, c, withQuery(quotaPolicyPath(templateID)+"/history", limitQuery(limit)))
}

// UserCoupons is GET /v1/templates/{id}/user-coupons: the user's coupons
// of the template, each with its history.
func (c *Client) UserCoupons(ctx context.Context, templateID int64, userID string) (UserCoupons, error) {
	path := withQuery(fmt.Sprintf("/v1/templates/%d/user-coupons", templateID), url.Values{"user_id": {userID}})
	return get[UserCoupons](ctx, c, path)
}

// Trends is GET /v1/templates/{id}/trends: claims, redemptions and
// releases per minute and channel over the last hours (0: the API's
// default, 3; at most 24).
func (c *Client) Trends(ctx context.Context, templateID int64, hours int) (Trends, error) {
	v := url.Values{}
	setCount(v, "hours", hours)
	return get[Trends](ctx, c, withQuery(fmt.Sprintf("/v1/templates/%d/trends", templateID), v))
}

// ReconcileTasks is GET /v1/reconcile/tasks: the last passes (at most
// limit; 0: the API's default, 20), newest first, and the open items.
func (c *Client) ReconcileTasks(ctx context.Context, limit int) (ReconcileTasks, error) {
	return get[ReconcileTasks](ctx, c, withQuery("/v1/reconcile/tasks", limitQuery(limit)))
}

// ResolveTask is POST /v1/reconcile/tasks/{id}/resolve. Not retried: a
// repeat after a lost answer is 409 not_open (IsCode(err, CodeNotOpen)).
func (c *Client) ResolveTask(ctx context.Context, taskID int64, operator, note string) (Resolved, error) {
	body := api.ResolveRequest{Operator: operator, Note: note}
	return send[Resolved](ctx, c, http.MethodPost, fmt.Sprintf("/v1/reconcile/tasks/%d/resolve", taskID), body, false)
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
	setText(v, "state", q.State)
	setText(v, "source", q.Source)
	setText(v, "kind", q.Kind)
	setCount(v, "template", q.Template)
	setCount(v, "limit", q.Limit)
	return get[Findings](ctx, c, withQuery("/v1/findings", v))
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
	return send[PolicyPreview](ctx, c, http.MethodPost, quotaPolicyPath(templateID)+"/preview", change, true)
}

// Legacy is GET /v1/legacy: the legacy shop's campaigns, read-only (an
// API started with -mapping; IsCode(err, CodeNotFound) without one).
func (c *Client) Legacy(ctx context.Context) (LegacyStatus, error) {
	return get[LegacyStatus](ctx, c, "/v1/legacy")
}

// LegacyTemplate is GET /v1/legacy/templates/{id}: one template of the
// legacy shop.
func (c *Client) LegacyTemplate(ctx context.Context, id int64) (LegacyStatus, error) {
	return get[LegacyStatus](ctx, c, "/v1/legacy/templates/"+strconv.FormatInt(id, 10))
}

// LegacyQuotaPolicy is GET /v1/legacy/templates/{id}/quota-policy: a
// legacy campaign's policy (modes off and signal only: couponlink never
// writes the shop's tables; an inherited auto is in force as signal).
func (c *Client) LegacyQuotaPolicy(ctx context.Context, templateID int64) (PolicyView, error) {
	return get[PolicyView](ctx, c, legacyPolicyPath(templateID))
}

// SetLegacyQuotaPolicy is PUT /v1/legacy/templates/{id}/quota-policy. Not
// retried; mode auto is refused (IsCode(err, CodeLegacyPolicyRefused)).
func (c *Client) SetLegacyQuotaPolicy(ctx context.Context, templateID int64, ch PolicyChange) (PolicyView, error) {
	return send[PolicyView](ctx, c, http.MethodPut, legacyPolicyPath(templateID), ch, false)
}

// PreviewLegacyQuotaPolicy is POST
// /v1/legacy/templates/{id}/quota-policy/preview: what the cdc's rule
// would recommend now for a legacy campaign with change over its policy
// (nothing is saved; Unknown says what the mapping cannot show).
func (c *Client) PreviewLegacyQuotaPolicy(ctx context.Context, templateID int64, change Override) (PolicyPreview, error) {
	return send[PolicyPreview](ctx, c, http.MethodPost, legacyPolicyPath(templateID)+"/preview", change, true)
}

// ResetLegacyQuotaPolicy is DELETE /v1/legacy/templates/{id}/quota-policy:
// the legacy campaign follows the defaults again. Not retried.
func (c *Client) ResetLegacyQuotaPolicy(ctx context.Context, templateID int64, changedBy, reason string) (PolicyView, error) {
	path := withQuery(legacyPolicyPath(templateID), url.Values{"changed_by": {changedBy}, "reason": {reason}})
	return send[PolicyView](ctx, c, http.MethodDelete, path, nil, false)
}

// LegacyQuotaPolicyHistory is GET
// /v1/legacy/templates/{id}/quota-policy/history: a legacy campaign's
// policy changes, newest first, at most limit (0: the API's default, 20).
func (c *Client) LegacyQuotaPolicyHistory(ctx context.Context, templateID int64, limit int) (PolicyHistory, error) {
	return get[PolicyHistory](ctx, c, withQuery(legacyPolicyPath(templateID)+"/history", limitQuery(limit)))
}

func legacyPolicyPath(templateID int64) string {
	return fmt.Sprintf("/v1/legacy/templates/%d/quota-policy", templateID)
}

func (c *Client) moveFinding(ctx context.Context, fingerprint, verb, operator, reason string) (Finding, error) {
	body := api.FindingRequest{Operator: operator, Reason: reason}
	return send[Finding](ctx, c, http.MethodPost, "/v1/findings/"+url.PathEscape(fingerprint)+"/"+verb, body, false)
}

// CDCStatus is GET /v1/cdc/status.
func (c *Client) CDCStatus(ctx context.Context) (CDCStatus, error) {
	return get[CDCStatus](ctx, c, "/v1/cdc/status")
}

func limitQuery(limit int) url.Values {
	v := url.Values{}
	setCount(v, "limit", limit)
	return v
}

// setText sets the parameter key of v to s, unless s is "" (the API's
// default: left out).
func setText(v url.Values, key, s string) {
	if s != "" {
		v.Set(key, s)
	}
}

// setCount sets the parameter key of v to n, unless n is 0 or less (the
// API's default: left out).
func setCount[N int | int64](v url.Values, key string, n N) {
	if n > 0 {
		v.Set(key, strconv.FormatInt(int64(n), 10))
	}
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
