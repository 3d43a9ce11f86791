package api

import "encoding/json"

// LegacyStatus is the answer of GET /v1/legacy and GET
// /v1/legacy/templates/{id}: a legacy shop's campaigns, served read-only
// by an API started with a mapping (couponlink never writes the shop's
// tables). With several sources, each template is the sum over the
// sources that answered: complete is false and left_out names the others
// (down, or no checkpoint yet) when one is missing.
type LegacyStatus struct {
	Mapping  string         `json:"mapping"` // the mapping's schema, as its file names it
	Sources  []LegacySource `json:"sources"`
	Complete bool           `json:"complete"`
	LeftOut  []string       `json:"left_out"`
	// Templates are the shop's templates as `couponlink status -mapping
	// -json` prints them, with "sources" (the sources each sum holds),
	// "left_out", and with several sources "parts" (each source's).
	Templates []json.RawMessage `json:"templates"`
}

// LegacySource is one source of a legacy shop (its cdc's checkpoint, on
// its server): up, down (error says why) or "no checkpoint".
type LegacySource struct {
	Name       string  `json:"name"`
	State      string  `json:"state"`
	Error      string  `json:"error,omitempty"`
	Position   string  `json:"position,omitempty"`
	LagSeconds float64 `json:"lag_seconds"`
}
