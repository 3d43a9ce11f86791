package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/quota"
)

// channels is GET /v1/templates/{id}/channels: per channel bucket its
// quota, claim guard, counts, redemption rate and last applied transfer.
func (s *Server) channels(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	cs, pos, err := quota.ChannelsAt(r.Context(), s.store.DB(), id, s.cfg.Inventory.Checkpoint)
	if err != nil {
		return 0, nil, err
	}
	out := api.Channels{Template: id, Channels: make([]api.ChannelView, len(cs)), CDC: pos}
	for i, c := range cs {
		out.Channels[i] = channelView(c)
	}
	return http.StatusOK, out, nil
}

// channelView is c as the API answers it.
func channelView(c quota.ChannelView) api.ChannelView {
	return api.ChannelView{Channel: c.Name, Quota: c.Quota, Claimed: c.Claimed, Held: c.Held, Used: c.Used, Expired: c.Expired,
		Returned: c.Returned, Released: c.Released, Claimable: c.Claimable, RedemptionRate: c.RedemptionRate, LastTransfer: c.LastTransfer}
}

// getQuotaPolicy is GET /v1/templates/{id}/quota-policy: the effective
// policy, the defaults and the template's override.
func (s *Server) getQuotaPolicy(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return readID(r, func(ctx context.Context, id int64) (quota.PolicyView, error) {
		return quota.GetPolicy(ctx, s.store.DB(), id)
	})
}

// setQuotaPolicy is PUT /v1/templates/{id}/quota-policy.
func (s *Server) setQuotaPolicy(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	var b api.PolicyChange // the fields left out (or null) keep their value
	if err := decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	v, err := quota.SetPolicy(r.Context(), s.store.DB(), id, b.Override, b.ChangedBy, b.Reason, via(r), identity(r))
	return http.StatusOK, v, err
}

// resetQuotaPolicy is DELETE /v1/templates/{id}/quota-policy?changed_by=..&reason=..:
// the template follows the defaults again. Who and why are query
// parameters (a DELETE has no body); other parameters are refused.
func (s *Server) resetQuotaPolicy(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	q, err := query(r, "changed_by", "reason")
	if err != nil {
		return 0, nil, err
	}
	v, err := quota.ResetPolicy(r.Context(), s.store.DB(), id, q.Get("changed_by"), q.Get("reason"), via(r), identity(r))
	return http.StatusOK, v, err
}

// previewQuotaPolicy is POST /v1/templates/{id}/quota-policy/preview: what
// the rule would decide now with the body's change over the policy in
// force (an empty body: the policy in force), by quota.Preview; nothing is
// saved. changed_by and reason may be sent (the form's body) and are not
// needed.
func (s *Server) previewQuotaPolicy(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	var b api.PolicyChange
	if r.ContentLength != 0 {
		if err := decode(w, r, &b); err != nil {
			return 0, nil, err
		}
	}
	in, d, err := quota.Preview(r.Context(), s.store.DB(), id, b.Override, time.Now().UTC())
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, previewOf(in, d), nil
}

// previewOf is a decision as the preview route answers it.
func previewOf(in quota.Input, d quota.Decision) api.PolicyPreview {
	v := api.PolicyPreview{Template: in.Template, Policy: in.Policy, AgeSeconds: in.Age.Seconds(), At: in.Now, Stop: d.Skip, Rule: d.Rule,
		Moves: make([]api.PreviewMove, len(d.Moves)), Total: d.Total(), Channels: make([]api.PreviewChannel, len(d.Seen)), Unknown: d.Unknown}
	if !in.LastMove.IsZero() {
		v.LastDecision = &in.LastMove
	}
	for i, m := range d.Moves {
		v.Moves[i] = api.PreviewMove{From: m.From, To: m.To, Amount: m.Amount, Why: m.Why}
	}
	for i, c := range d.Seen {
		v.Channels[i] = api.PreviewChannel{Channel: c.Name, Quota: c.Quota, Claimed: c.Claimed, Claimable: c.Claimable, Claims: c.Claims(),
			Released: c.Released, RedemptionRate: c.Rate, SoldOut: !in.QuotaUnknown && c.Claimable == 0, QuotaUnknown: in.QuotaUnknown,
			Role: c.Role, Why: c.Why}
	}
	return v
}
