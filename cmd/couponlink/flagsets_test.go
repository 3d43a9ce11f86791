package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
)

// FlagSets lists every command's flags as the command builds them: its
// usage is what `couponlink <command> -h` prints, and -h exits 0.
func TestFlagSetsAreTheCommands(t *testing.T) {
	sets := FlagSets()
	var names []string
	for _, f := range sets {
		names = append(names, f.Name())
		args := append(strings.Fields(strings.TrimPrefix(f.Name(), "couponlink ")), "-h")
		var want bytes.Buffer
		f.SetOutput(&want)
		f.Usage()
		code, _, errs := cli(t, args...)
		assert.Equal(t, 0, code, "%s: %s", f.Name(), errs)
		assert.Equal(t, want.String(), errs, f.Name())
	}
	assert.Equal(t, []string{"couponlink migrate", "couponlink api", "couponlink expire", "couponlink cdc", "couponlink reconcile",
		"couponlink status", "couponlink anomalies list", "couponlink anomalies ack", "couponlink anomalies close", "couponlink anomalies reopen", "couponlink quota policy show", "couponlink quota policy set", "couponlink quota policy reset",
		"couponlink quota policy audit", "couponlink mapping check", "couponlink audit", "couponlink version"}, names)
}

// A flag's help names a variable in brackets when, and only when, the
// variable sets it; the one-shot actions have none.
func TestHelpNamesOnlyRealVariables(t *testing.T) {
	oneShot := map[string]bool{"once": true, "list": true, "resolve": true, "note": true, "json": true, "template": true}
	for _, f := range FlagSets() {
		f.VisitAll(func(fl *flag.Flag) {
			env := f.Env(fl.Name)
			if env == "" {
				assert.NotContains(t, fl.Usage, "[COUPONLINK_", "%s -%s", f.Name(), fl.Name)
				return
			}
			assert.False(t, oneShot[fl.Name], "%s -%s is an action of the command line, not of the environment", f.Name(), fl.Name)
			assert.True(t, strings.HasPrefix(env, "COUPONLINK_"), env)
			assert.Contains(t, fl.Usage, " ["+env, "%s -%s", f.Name(), fl.Name)
		})
	}
}

// -h and help print the usage of the commands with subcommands on stdout
// and exit 0.
func TestSubcommandHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"quota", "-h"}, {"quota", "policy", "-h"}, {"quota", "policy", "help"},
		{"quota", "policy", "--help"}, {"mapping", "-h"}, {"mapping", "help"}} {
		code, out, errs := cli(t, args...)
		assert.Equal(t, 0, code, "%v: %s", args, errs)
		assert.Contains(t, out, "usage: couponlink ", args)
		assert.Empty(t, errs, args)
	}
	code, _, errs := cli(t, "quota", "policy", "nope")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, `couponlink quota policy: unknown command "nope"`)
}

// -snapshot-position (or its variable) is checked by the commands that
// take a snapshot, before they open anything.
func TestSnapshotPositionFlag(t *testing.T) {
	for _, cmd := range []string{"cdc", "reconcile"} {
		code, _, errs := cli(t, cmd, "-snapshot-position", "ftwrl")
		assert.Equal(t, 2, code, errs)
		assert.Contains(t, errs, `invalid value "ftwrl" for flag -snapshot-position: not a snapshot position method (auto, status, lock or tables)`)
	}
	defer inventory.SetSnapshotMethod(canal.SnapshotAuto)
	badDSN := "nobody@tcp(127.0.0.1:1"
	t.Setenv("COUPONLINK_SNAPSHOT_POSITION", "tables")
	code, _, errs := cli(t, "reconcile", "-once", "-dsn", badDSN)
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, "parse MySQL DSN", "a good method: the pass goes on to the database")
	assert.Equal(t, canal.SnapshotTables, inventory.SetSnapshotMethod(canal.SnapshotAuto), "the variable's method is the process's")
	code, _, errs = cli(t, "reconcile", "-once", "-dsn", badDSN, "-snapshot-position", "lock")
	assert.Equal(t, 2, code, errs)
	assert.Equal(t, canal.SnapshotLock, inventory.SetSnapshotMethod(canal.SnapshotAuto), "the flag wins over the variable")

	t.Setenv("COUPONLINK_SNAPSHOT_POSITION", "ftwrl")
	code, _, errs = cli(t, "reconcile", "-once")
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, `bad environment: COUPONLINK_SNAPSHOT_POSITION="ftwrl" is not a snapshot position method (auto, status, lock or tables)`)
	code, _, errs = cli(t, "status", "-dsn", badDSN)
	assert.Equal(t, 1, code, errs)
	assert.Contains(t, errs, "parse MySQL DSN", "a command that takes no snapshot does not read the variable")
}
