package main

import (
	"io"

	"github.com/couponlink/couponlink/internal/settings"
)

// FlagSets are the flag sets of every command (each named "couponlink
// <command>", e.g. "couponlink quota policy set"), built by the functions
// the commands build them with, and not parsed: what a generator of the
// flags' documentation lists (each flag's help and default, and its
// environment variable: settings.Flags.Env). The environment's values are
// the defaults, as for the commands.
func FlagSets() []*settings.Flags {
	var out []*settings.Flags
	add := func(f *settings.Flags, _ any) { out = append(out, f) }
	w := io.Discard
	add(migrateFlags(w))
	add(apiFlags(w))
	add(expireFlags(w))
	add(cdcFlags(w))
	add(reconcileFlags(w))
	add(statusFlags(w))
	for _, c := range findingsCommands() {
		add(findingsFlags(c, w))
	}
	for _, c := range quotaCommands() {
		out = append(out, c.flags("quota policy "+c.name, w))
	}
	add(mappingCheckFlags(w))
	add(auditFlags(w))
	out = append(out, versionFlags(w))
	return out
}
