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
	var out Template
	err := c.call(ctx, http.MethodPost, "/v1/templates", t, &out, false)
	return out, err
}

// GetTemplate is GET /v1/templates/{id}.
func (c *Client) GetTemplate(ctx context.Context, id int64) (Template, error) {
	var out Template
	err := c.call(ctx, http.MethodGet, fmt.Sprintf("/v1/templates/%d", id), nil, &out, true)
	return out, err
}

// Inventory is GET /v1/templates/{id}/inventory.
func (c *Client) Inventory(ctx context.Context, templateID int64) (Inventory, error) {
	var out Inventory
	err := c.call(ctx, http.MethodGet, fmt.Sprintf("/v1/templates/%d/inventory", templateID), nil, &out, true)
	return out, err
}

// Channels is GET /v1/templates/{id}/channels.
func (c *Client) Channels(ctx context.Context, templateID int64) (Channels, error) {
	var out Channels
	err := c.call(ctx, http.MethodGet, fmt.Sprintf("/v1/templates/%d/channels", templateID), nil, &out, true)
	return out, err
}

// QuotaPolicy is GET /v1/templates/{id}/quota-policy.
func (c *Client) QuotaPolicy(ctx context.Context, templateID int64) (PolicyView, error) {
	var out PolicyView
	err := c.call(ctx, http.MethodGet, quotaPolicyPath(templateID), nil, &out, true)
	return out, err
}

// SetQuotaPolicy is PUT /v1/templates/{id}/quota-policy. Not retried: each
// change is a new audited version.
func (c *Client) SetQuotaPolicy(ctx context.Context, templateID int64, ch PolicyChange) (PolicyView, error) {
	var out PolicyView
	err := c.call(ctx, http.MethodPut, quotaPolicyPath(templateID), ch, &out, false)
	return out, err
}

// ResetQuotaPolicy is DELETE /v1/templates/{id}/quota-policy. Not retried.
func (c *Client) ResetQuotaPolicy(ctx context.Context, templateID int64, changedBy, reason string) (PolicyView, error) {
	var out PolicyView
	q := url.Values{"changed_by": {changedBy}, "reason": {reason}}
	err := c.call(ctx, http.MethodDelete, quotaPolicyPath(templateID)+"?"+q.Encode(), nil, &out, false)
	return out, err
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
	var out Claim
	err := c.call(ctx, http.MethodPost, "/v1/claims", r, &out, true)
	return out, err
}

// Redeem is POST /v1/redemptions; retried (the same order redeeming again
// replays).
func (c *Client) Redeem(ctx context.Context, r RedeemRequest) (Redemption, error) {
	var out Redemption
	err := c.call(ctx, http.MethodPost, "/v1/redemptions", r, &out, true)
	return out, err
}

// Refund is POST /v1/refunds; retried (the same coupon, order and mode
// replay).
func (c *Client) Refund(ctx context.Context, r RefundRequest) (Refund, error) {
	var out Refund
	err := c.call(ctx, http.MethodPost, "/v1/refunds", r, &out, true)
	return out, err
}

// Void is POST /v1/voids. An empty RequestID is filled with a new one
// before the first attempt; retried with the same one.
func (c *Client) Void(ctx context.Context, r VoidRequest) (VoidResponse, error) {
	if r.RequestID == "" {
		r.RequestID = NewRequestID()
	}
	var out VoidResponse
	err := c.call(ctx, http.MethodPost, "/v1/voids", r, &out, true)
	return out, err
}

// Expire is POST /v1/expire: one sweep of at most limit coupons (0: all
// that are due); retried.
func (c *Client) Expire(ctx context.Context, limit int) (ExpireResult, error) {
	var out ExpireResult
	err := c.call(ctx, http.MethodPost, "/v1/expire", api.ExpireRequest{Limit: limit}, &out, true)
	return out, err
}

// History is GET /v1/user-coupons/{id}/history.
func (c *Client) History(ctx context.Context, userCouponID int64) (History, error) {
	var out History
	err := c.call(ctx, http.MethodGet, fmt.Sprintf("/v1/user-coupons/%d/history", userCouponID), nil, &out, true)
	return out, err
}

// Health is GET /healthz.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var out Health
	err := c.call(ctx, http.MethodGet, "/healthz", nil, &out, true)
	return out, err
}

// OpenAPI is GET /openapi.json: the API's document, as served.
func (c *Client) OpenAPI(ctx context.Context) ([]byte, error) {
	var out []byte
	err := c.call(ctx, http.MethodGet, "/openapi.json", nil, &out, true)
	return out, err
}

// Metrics is GET /metrics: the Prometheus text exposition.
func (c *Client) Metrics(ctx context.Context) ([]byte, error) {
	var out []byte
	err := c.call(ctx, http.MethodGet, "/metrics", nil, &out, true)
	return out, err
}
