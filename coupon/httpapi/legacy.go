package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/inventory/view"
)

// The legacy routes: a legacy shop attached through a mapping, its
// campaigns read (never written) as `couponlink status -mapping` reads
// them, on the API's database (one server) or on every source's server
// at once (several), summed.

// Legacy is the legacy shop an API serves read-only beside its own routes.
type Legacy struct {
	Mapping *inventory.Mapping
	// Open opens a source's DSN (a mapping with sources), closed after
	// each read; Timeout bounds each source's answer (default 5 s).
	Open    inventory.Opener
	Timeout time.Duration
}

// legacy is the configured legacy shop, or not_found; r may carry no
// query parameter but params.
func (s *Server) legacy(r *http.Request, params ...string) (*Legacy, error) {
	if _, err := query(r, params...); err != nil {
		return nil, err
	}
	l := s.cfg.Legacy
	if l == nil || l.Mapping == nil {
		return nil, &coupon.Error{Code: api.CodeNotFound, Message: "this API serves couponlink's own schema: it was started without -mapping, so it has no legacy shop"}
	}
	return l, nil
}

func (l *Legacy) timeout() time.Duration {
	if l.Timeout <= 0 {
		return 5 * time.Second
	}
	return l.Timeout
}

// legacyStatus is GET /v1/legacy: every template of the legacy shop.
func (s *Server) legacyStatus(w http.ResponseWriter, r *http.Request) (int, any, error) {
	l, err := s.legacy(r)
	if err != nil {
		return 0, nil, err
	}
	if l.Mapping.HasSources() {
		return acrossAnswer(l.Mapping)(inventory.ReadSources(r.Context(), l.Mapping, l.Open, l.timeout()))
	}
	st, err := inventory.ReadMappedStatus(r.Context(), s.store.DB(), s.checkpoint(), l.Mapping)
	if err != nil {
		return 0, nil, err
	}
	v, err := s.oneServerJSON(l.Mapping, st, st.Templates)
	return http.StatusOK, v, err
}

// legacyTemplate is GET /v1/legacy/templates/{id}: one template of the
// legacy shop, with its channels (and with sources each source's part).
func (s *Server) legacyTemplate(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	l, err := s.legacy(r)
	if err != nil {
		return 0, nil, err
	}
	if l.Mapping.HasSources() {
		return acrossAnswer(l.Mapping)(inventory.ReadSourcesTemplate(r.Context(), l.Mapping, l.Open, l.timeout(), id))
	}
	t, err := inventory.NewQueries(l.Mapping).ReadTemplate(r.Context(), s.store.DB(), id)
	if err != nil {
		return 0, nil, err
	}
	st, err := inventory.ReadPositions(r.Context(), s.store.DB(), s.checkpoint())
	if err != nil {
		return 0, nil, err
	}
	v, err := s.oneServerJSON(l.Mapping, st, []view.Template{t})
	return http.StatusOK, v, err
}

// oneServerJSON is a legacy shop on one server: its one source is the
// API's cdc checkpoint.
func (s *Server) oneServerJSON(m *inventory.Mapping, st inventory.Status, ts []view.Template) (api.LegacyStatus, error) {
	src := api.LegacySource{Name: s.checkpoint(), State: string(inventory.SourceUp), LagSeconds: st.Lag().Seconds()}
	v := api.LegacyStatus{Mapping: m.Schema, Complete: st.Found, LeftOut: []string{}, Templates: []json.RawMessage{}}
	if st.Found {
		src.Position = st.Checkpoint.Pos.String()
	} else {
		src.State, v.LeftOut = string(inventory.SourceNotStarted), []string{src.Name}
	}
	v.Sources = []api.LegacySource{src}
	for _, t := range ts {
		b, err := withSources(t, []string{src.Name}, v.LeftOut, nil)
		if err != nil {
			return v, err
		}
		v.Templates = append(v.Templates, b)
	}
	return v, nil
}

// acrossAnswer is the answer of a read over m's sources.
func acrossAnswer(m *inventory.Mapping) func(inventory.Across, error) (int, any, error) {
	return func(a inventory.Across, err error) (int, any, error) {
		if err != nil {
			return 0, nil, err
		}
		v, err := acrossJSON(m, a)
		return http.StatusOK, v, err
	}
}

// acrossJSON is a legacy shop summed over its sources, with each source's
// part of each template.
func acrossJSON(m *inventory.Mapping, a inventory.Across) (api.LegacyStatus, error) {
	v := api.LegacyStatus{Mapping: m.Schema, Complete: a.Complete(), LeftOut: a.Left(), Templates: []json.RawMessage{}}
	if v.LeftOut == nil {
		v.LeftOut = []string{}
	}
	for _, src := range a.Sources {
		ls := api.LegacySource{Name: src.Name, State: string(src.State)}
		if src.Err != nil {
			ls.Error = src.Err.Error()
		} else if src.Status.Found {
			ls.Position, ls.LagSeconds = src.Status.Checkpoint.Pos.String(), src.Status.Lag().Seconds()
		}
		v.Sources = append(v.Sources, ls)
	}
	for _, t := range a.Templates {
		var ps []json.RawMessage
		for _, p := range t.Parts {
			b, err := withSources(p.Template, []string{p.Source}, nil, nil)
			if err != nil {
				return v, err
			}
			ps = append(ps, b)
		}
		b, err := withSources(t.Template, t.Sources, t.Left, ps)
		if err != nil {
			return v, err
		}
		v.Templates = append(v.Templates, b)
	}
	return v, nil
}

// withSources is t's JSON (as `couponlink status -mapping -json` prints
// it) with "sources", "left_out" and, when given, "parts".
func withSources(t view.Template, sources, left []string, parts []json.RawMessage) (json.RawMessage, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	if left == nil {
		left = []string{}
	}
	extra := map[string]any{"sources": sources, "left_out": left}
	if parts != nil {
		extra["parts"] = parts
	}
	for k, x := range extra {
		if fields[k], err = json.Marshal(x); err != nil {
			return nil, err
		}
	}
	return json.Marshal(fields)
}
