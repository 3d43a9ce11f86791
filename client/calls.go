package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/couponlink/couponlink/api"
)

// One method per route of the API; see the package doc for which are
// retried.

// CreateTemplate is POST /v1/templates. Not retried: the route has no
// idempotency key.
func (c *Client) CreateTemplate(ctx context.Context, t NewTemplate) (Template, error) {
	return send[Template](ctx, c, http.MethodPost, "/v1/templates", t, false)
}

// GetTemplate is GET /v1/templates/{id}.
func (c *Client) GetTemplate(ctx context.Context, id int64) (Template, error) {
	return get[Template](ctx, c, fmt.Sprintf("/v1/templates/%d", id))
}

// Inventory is GET /v1/templates/{id}/inventory.
func (c *Client) Inventory(ctx context.Context, templateID int64) (Inventory, error) {
	return get[Inventory](ctx, c, fmt.Sprintf("/v1/templates/%d/inventory", templateID))
}

// Channels is GET /v1/templates/{id}/channels.
func (c *Client) Channels(ctx context.Context, templateID int64) (Channels, error) {
	return get[Channels](ctx, c, fmt.Sprintf("/v1/templates/%d/channels", templateID))
}

// QuotaPolicy is GET /v1/templates/{id}/quota-policy.
func (c *Client) QuotaPolicy(ctx context.Context, templateID int64) (PolicyView, error) {
	return get[PolicyView](ctx, c, quotaPolicyPath(templateID))
}

// SetQuotaPolicy is PUT /v1/templates/{id}/quota-policy. Not retried: each
// change is a new audited version.
func (c *Client) SetQuotaPolicy(ctx context.Context, templateID int64, ch PolicyChange) (PolicyView, error) {
	return send[PolicyView](ctx, c, http.MethodPut, quotaPolicyPath(templateID), ch, false)
}

// ResetQuotaPolicy is DELETE /v1/templates/{id}/quota-policy. Not retried.
func (c *Client) ResetQuotaPolicy(ctx context.Context, templateID int64, changedBy, reason string) (PolicyView, error) {
	q := url.Values{"changed_by": {changedBy}, "reason": {reason}}
	return send[PolicyView](ctx, c, http.MethodDelete, quotaPolicyPath(templateID)+"?"+q.Encode(), nil, false)
}

func quotaPolicyPath(templateID int64) string {
	return fmt.Sprintf("/v1/templates/%d/quota-policy", templateID)
}

// Claim is POST /v1/claims. An empty RequestID is filled with a new one
// before the first attempt; retried with the same one. A replay answers
// the first claim's coupon with Replayed set.
func (c *Client) Claim(ctx context.Context, r ClaimRequest) (Claim, error) {
	if r.RequestID == "" {
		r.RequestID = NewRequestID()
	}
	return send[Claim](ctx, c, http.MethodPost, "/v1/claims", r, true)
}

// Redeem is POST /v1/redemptions; retried (the same order redeeming again
// replays).
func (c *Client) Redeem(ctx context.Context, r RedeemRequest) (Redemption, error) {
	return send[Redemption](ctx, c, http.MethodPost, "/v1/redemptions", r, true)
}

// Refund is POST /v1/refunds; retried (the same coupon, order and mode
// replay).
func (c *Client) Refund(ctx context.Context, r RefundRequest) (Refund, error) {
	return send[Refund](ctx, c, http.MethodPost, "/v1/refunds", r, true)
}

// Void is POST /v1/voids. An empty RequestID is filled with a new one
// before the first attempt; retried with the same one.
func (c *Client) Void(ctx context.Context, r VoidRequest) (VoidResponse, error) {
	if r.RequestID == "" {
		r.RequestID = NewRequestID()
	}
	return send[VoidResponse](ctx, c, http.MethodPost, "/v1/voids", r, true)
}

// Expire is POST /v1/expire: one sweep of at most limit coupons (0: all
// that are due); retried.
func (c *Client) Expire(ctx context.Context, limit int) (ExpireResult, error) {
	return send[ExpireResult](ctx, c, http.MethodPost, "/v1/expire", api.ExpireRequest{Limit: limit}, true)
}

// History is GET /v1/user-coupons/{id}/history.
func (c *Client) History(ctx context.Context, userCouponID int64) (History, error) {
	return get[History](ctx, c, fmt.Sprintf("/v1/user-coupons/%d/history", userCouponID))
}

// Health is GET /healthz.
func (c *Client) Health(ctx context.Context) (Health, error) {
	return get[Health](ctx, c, "/healthz")
}

// OpenAPI is GET /openapi.json: the API's document, as served.
func (c *Client) OpenAPI(ctx context.Context) ([]byte, error) {
	return get[[]byte](ctx, c, "/openapi.json")
}

// Metrics is GET /metrics: the Prometheus text exposition.
func (c *Client) Metrics(ctx context.Context) ([]byte, error) {
	return get[[]byte](ctx, c, "/metrics")
}
