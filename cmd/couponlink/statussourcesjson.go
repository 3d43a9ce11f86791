package main

import (
	"bytes"
	"encoding/json"

	"github.com/couponlink/couponlink/inventory"
)

// sourcesStatusJSON is `couponlink status -json` with a mapping of several
// sources: each source's state and where its cdc stands, and the pairs
// and templates summed over the sources that answered. complete is false
// when a source is left out (left_out names them): the sums then miss its
// coupons.
type sourcesStatusJSON struct {
	Sources   []sourceJSON         `json:"sources"`
	Complete  bool                 `json:"complete"`
	LeftOut   []string             `json:"left_out,omitempty"`
	Pairs     []summedPairJSON     `json:"pairs"`
	Templates []summedTemplateJSON `json:"templates,omitempty"`
}

// sourceJSON is one source: up, down (error says why) or no checkpoint;
// when it answered, where its cdc stands (as status -json prints it for
// one server, without the inventory).
type sourceJSON struct {
	Name  string `json:"name"`
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	*cdcJSON
}

// summedPairJSON is a pair summed over sources, which names them, with
// each source's part.
type summedPairJSON struct {
	pairJSON
	Sources  []string       `json:"sources"`
	Complete bool           `json:"complete"`
	LeftOut  []string       `json:"left_out,omitempty"`
	Parts    []pairPartJSON `json:"parts"`
}

type pairPartJSON struct {
	Source string `json:"source"`
	pairJSON
}

// summedTemplateJSON is a legacy template summed over sources: the JSON
// of view.Template with sources, complete, left_out, differ and parts
// (each source's view.Template with its source).
type summedTemplateJSON struct{ t inventory.SourcesTemplate }

func (s summedTemplateJSON) MarshalJSON() ([]byte, error) {
	t := s.t
	parts := make([]json.RawMessage, 0, len(t.Parts))
	for _, p := range t.Parts {
		b, err := withFields(p.Template, struct {
			Source string `json:"source"`
		}{p.Source})
		if err != nil {
			return nil, err
		}
		parts = append(parts, b)
	}
	return withFields(t.Template, struct {
		Sources  []string          `json:"sources"`
		Complete bool              `json:"complete"`
		LeftOut  []string          `json:"left_out,omitempty"`
		Differ   string            `json:"differ,omitempty"`
		Parts    []json.RawMessage `json:"parts"`
	}{t.Sources, t.Complete(), t.Left, t.Differ, parts})
}

// sourcesTemplateJSON is `couponlink status -template N -json` with
// sources: the summed template, and the sources' states.
type sourcesTemplateJSON struct {
	t       inventory.SourcesTemplate
	sources []inventory.SourceStatus
}

// sourceStateJSON is a source as status -template shows it: its state,
// checkpoint and lag.
type sourceStateJSON struct {
	Name       string  `json:"name"`
	State      string  `json:"state"`
	Error      string  `json:"error,omitempty"`
	Position   string  `json:"position,omitempty"`
	LagSeconds float64 `json:"lag_seconds"`
}

func (s sourcesTemplateJSON) MarshalJSON() ([]byte, error) {
	states := make([]sourceStateJSON, 0, len(s.sources))
	for _, src := range s.sources {
		sj := sourceStateJSON{Name: src.Name, State: string(src.State), LagSeconds: src.Status.Lag().Seconds()}
		if src.Err != nil {
			sj.Error = src.Err.Error()
		}
		if src.Status.Found {
			sj.Position = src.Status.Checkpoint.Pos.String()
		}
		states = append(states, sj)
	}
	return withFields(summedTemplateJSON{s.t}, struct {
		States []sourceStateJSON `json:"source_states"`
	}{states})
}

// withFields is the JSON object of a with the fields of the object b
// added after its own.
func withFields(a, b any) ([]byte, error) {
	ja, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	jb, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	ja, jb = bytes.TrimSpace(ja), bytes.TrimSpace(jb)
	if len(jb) <= 2 {
		return ja, nil
	}
	if len(ja) <= 2 {
		return jb, nil
	}
	return append(append(ja[:len(ja)-1:len(ja)-1], ','), jb[1:]...), nil
}

// sourcesJSON is the sources' states and, where they answered, their
// cdcs.
func sourcesJSON(srcs []inventory.SourceStatus) []sourceJSON {
	out := make([]sourceJSON, 0, len(srcs))
	for _, s := range srcs {
		sj := sourceJSON{Name: s.Name, State: string(s.State)}
		if s.Err != nil {
			sj.Error = s.Err.Error()
		} else {
			c := cdcJSONOf(s.Name, s.Status)
			sj.cdcJSON = &c
		}
		out = append(out, sj)
	}
	return out
}

// sourcesJSONOf is the status over the sources as JSON.
func sourcesJSONOf(a inventory.Across) sourcesStatusJSON {
	v := sourcesStatusJSON{Sources: sourcesJSON(a.Sources), Complete: a.Complete(), LeftOut: a.Left(), Pairs: []summedPairJSON{}}
	for _, p := range a.Pairs {
		pj := summedPairJSON{pairJSON: pairJSONOf(p.PairStatus), Sources: p.Sources, Complete: p.Complete(), LeftOut: p.Left}
		for _, part := range p.Parts {
			pj.Parts = append(pj.Parts, pairPartJSON{Source: part.Source, pairJSON: pairJSONOf(part.PairStatus)})
		}
		v.Pairs = append(v.Pairs, pj)
	}
	for _, t := range a.Templates {
		v.Templates = append(v.Templates, summedTemplateJSON{t})
	}
	return v
}
