package httpapi

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/quota"
)

// The quota policy of a legacy campaign (quota/legacy.go): GET, PUT and
// DELETE /v1/legacy/templates/{id}/quota-policy, POST .../preview and GET
// .../history, beside the legacy template's read route, in signal mode
// only (auto is 409 legacy_policy_refused). The policy lives in couponlink's own database:
// the API's on one server, the judge source's with several (whose cdc
// decides). The preview reads the rule's inputs as that cdc does: each
// channel's counts (the cdc's counters, summed over the sources) and the
// shop's per-channel budget (the mapping's channel_quota, on the judge's
// server with sources).

// legacyPolicyDB is the database of a legacy shop's policies, and the
// mapping of its server, after checking that the shop has the template;
// done closes what it opened.
func (s *Server) legacyPolicyDB(r *http.Request, params ...string) (id int64, l *Legacy, db *sql.DB, m *inventory.Mapping, done func(), err error) {
	if id, err = pathID(r); err != nil {
		return 0, nil, nil, nil, nil, err
	}
	if l, err = s.legacy(r, params...); err != nil {
		return 0, nil, nil, nil, nil, err
	}
	if !l.Mapping.HasSources() {
		if _, err := inventory.NewQueries(l.Mapping).ReadTemplate(r.Context(), s.store.DB(), id); err != nil {
			return 0, nil, nil, nil, nil, err
		}
		return id, l, s.store.DB(), l.Mapping, func() {}, nil
	}
	if err := acrossFound(inventory.ReadSourcesTemplate(r.Context(), l.Mapping, l.Open, l.timeout(), id)); err != nil {
		return 0, nil, nil, nil, nil, err
	}
	judge, dsn, err := judgeOf(l.Mapping)
	if err != nil {
		return 0, nil, nil, nil, nil, err
	}
	if db, err = l.Open(dsn); err != nil {
		return 0, nil, nil, nil, nil, err
	}
	return id, l, db, judge, func() { _ = db.Close() }, nil
}

// acrossFound is the error of a read of one template over the sources.
func acrossFound(_ inventory.Across, err error) error { return err }

// judgeOf is the mapping and DSN of the source whose cdc decides what
// only the sum shows (inventory.Mapping.Judge).
func judgeOf(m *inventory.Mapping) (*inventory.Mapping, string, error) {
	first, _, err := m.OneSource(m.Sources[0].Name)
	if err != nil {
		return nil, "", err
	}
	return m.OneSource(first.Judge())
}

// getLegacyPolicy is GET /v1/legacy/templates/{id}/quota-policy.
func (s *Server) getLegacyPolicy(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, _, db, _, done, err := s.legacyPolicyDB(r)
	if err != nil {
		return 0, nil, err
	}
	defer done()
	v, err := quota.GetLegacyPolicy(r.Context(), db, id)
	return http.StatusOK, v, err
}

// setLegacyPolicy is PUT /v1/legacy/templates/{id}/quota-policy: as the
// own templates' route, mode auto refused.
func (s *Server) setLegacyPolicy(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var b api.PolicyChange
	if err := decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	id, _, db, _, done, err := s.legacyPolicyDB(r)
	if err != nil {
		return 0, nil, err
	}
	defer done()
	v, err := quota.SetLegacyPolicy(r.Context(), db, id, b.Override, b.ChangedBy, b.Reason, via(r), identity(r))
	return http.StatusOK, v, err
}

// resetLegacyPolicy is DELETE
// /v1/legacy/templates/{id}/quota-policy?changed_by=..&reason=..: the
// legacy template follows the defaults again, as the own templates' route.
func (s *Server) resetLegacyPolicy(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, _, db, _, done, err := s.legacyPolicyDB(r, "changed_by", "reason")
	if err != nil {
		return 0, nil, err
	}
	defer done()
	q := r.URL.Query()
	v, err := quota.ResetLegacyPolicy(r.Context(), db, id, q.Get("changed_by"), q.Get("reason"), via(r), identity(r))
	return http.StatusOK, v, err
}

// legacyPolicyHistory is GET /v1/legacy/templates/{id}/quota-policy/history:
// the legacy template's policy changes, newest first, as the own
// templates' route answers them.
func (s *Server) legacyPolicyHistory(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, _, db, _, done, err := s.legacyPolicyDB(r, "limit")
	if err != nil {
		return 0, nil, err
	}
	defer done()
	return policyAudit(r, id, func(ctx context.Context, limit int) ([]quota.AuditEntry, error) {
		return quota.LegacyAudit(ctx, db, id, limit)
	})
}

// previewLegacyPolicy is POST /v1/legacy/templates/{id}/quota-policy/preview:
// what the cdc's legacy pass would recommend now (quota.PreviewLegacy).
func (s *Server) previewLegacyPolicy(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var b api.PolicyChange
	if r.ContentLength != 0 {
		if err := decode(w, r, &b); err != nil {
			return 0, nil, err
		}
	}
	id, l, db, m, done, err := s.legacyPolicyDB(r)
	if err != nil {
		return 0, nil, err
	}
	defer done()
	chans, err := legacyChannels(r.Context(), l, db, m, id)
	if err != nil {
		return 0, nil, err
	}
	in, d, err := quota.PreviewLegacy(r.Context(), db, id, b.Override, chans, time.Now().UTC())
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, previewOf(in, d), nil
}

// legacyChannels are a legacy template's channels as the cdc's rule sees
// them: the shop's per-channel budgets (on db, read with m) and the cdc's
// counts, summed over the sources; without budgets, the counted channels
// with their quotas unknown.
func legacyChannels(ctx context.Context, l *Legacy, db *sql.DB, m *inventory.Mapping, id int64) (quota.LegacyChannels, error) {
	var counts map[inventory.Pair]*inventory.Counts
	var err error
	if l.Mapping.HasSources() {
		counts, err = sumCounters(ctx, l, id)
	} else {
		counts, err = inventory.LoadCounters(ctx, db, id)
	}
	if err != nil {
		return quota.LegacyChannels{}, err
	}
	quotas, err := inventory.NewQueries(m).Quotas(ctx, db, id)
	if err != nil {
		return quota.LegacyChannels{}, err
	}
	out := quota.LegacyChannels{QuotaUnknown: m.ChannelQuota == nil}
	add := func(p inventory.Pair, q inventory.Quota) {
		c := quota.Channel{Name: p.Channel, Quota: q.Quota, Claimed: q.Claimed}
		if n := counts[p]; n != nil {
			c.AddCounts(*n)
		}
		out.Channels = append(out.Channels, c)
	}
	if out.QuotaUnknown {
		for p := range counts {
			add(p, inventory.Quota{})
		}
	} else {
		for p, q := range quotas {
			add(p, q)
		}
	}
	sort.Slice(out.Channels, func(i, j int) bool { return out.Channels[i].Name < out.Channels[j].Name })
	return out, nil
}

// sumCounters is the template's counters summed over every source, each
// at its cdc's checkpoint; a source that cannot be asked, or has no
// checkpoint yet, is unavailable: the cdc does not decide on a partial
// sum either.
func sumCounters(ctx context.Context, l *Legacy, id int64) (map[inventory.Pair]*inventory.Counts, error) {
	out := map[inventory.Pair]*inventory.Counts{}
	for _, spec := range l.Mapping.Sources {
		if err := addSource(ctx, l, spec.Name, id, out); err != nil {
			return nil, &coupon.Error{Code: api.CodeUnavailable, Message: fmt.Sprintf(
				"source %s cannot be asked (%v): the rule needs every source's counts, and the cdc waits for it too", spec.Name, err)}
		}
	}
	return out, nil
}

// addSource adds one source's counters of the template to out.
func addSource(ctx context.Context, l *Legacy, name string, id int64, out map[inventory.Pair]*inventory.Counts) error {
	_, dsn, err := l.Mapping.OneSource(name)
	if err != nil {
		return err
	}
	db, err := l.Open(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, l.timeout())
	defer cancel()
	if _, found, err := inventory.LoadCheckpoint(ctx, db, name); err != nil || !found {
		if err == nil {
			err = errors.New("no checkpoint yet: its cdc has not counted its coupons")
		}
		return err
	}
	counts, err := inventory.LoadCounters(ctx, db, id)
	for p, n := range counts {
		if out[p] == nil {
			out[p] = &inventory.Counts{}
		}
		out[p].Add(*n)
	}
	return err
}
