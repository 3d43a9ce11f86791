// Package view is the part of the read model that the API links: the one
// count type (Counts), a template's live count and the cdc's counters of
// it, as GET /v1/templates/{id}/inventory answers them (Reader), and a
// legacy shop's template beside its counters, as status shows it
// (Template: name, budget, remaining, claimable, end time, labels). It
// needs neither the binlog reader (package canal) nor Redis, so the API
// links neither; package inventory holds the rest of the read model and
// names Counts as inventory.Counts.
package view
