package sink_test

import (
	"database/sql"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/sink"
)

// The mode is explicit: reference (couponlink's own tables, with releases
// and rebalancing) or legacy (a mapping file's tables); a mode that does
// not fit the mapping is refused at start, saying what to do.
func TestModeIsValidated(t *testing.T) {
	db, err := sql.Open("mysql", "nobody@tcp(127.0.0.1:1)/x") // never connects here
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	legacy, err := canal.LoadMapping([]byte(strings.ReplaceAll(legacyMappingYAML, "LEGACY", "legacydb")))
	require.NoError(t, err)
	chores := func(s *sink.Sink) (names []string) {
		for _, c := range s.Chores() {
			names = append(names, c.Name())
		}
		return names
	}
	for name, tc := range map[string]struct {
		cfg    sink.Config
		mode   sink.Mode
		chores []string
		err    string
	}{
		"default":                     {cfg: sink.Config{}, mode: sink.ModeReference, chores: []string{"corrections", "release", "rebalance"}},
		"reference, its mapping":      {cfg: sink.Config{Mode: sink.ModeReference, Mapping: canal.DefaultMapping()}, mode: sink.ModeReference, chores: []string{"corrections", "release", "rebalance"}},
		"a legacy mapping":            {cfg: sink.Config{Mapping: legacy}, mode: sink.ModeLegacy, chores: []string{"corrections"}},
		"legacy, its mapping":         {cfg: sink.Config{Mode: sink.ModeLegacy, Mapping: legacy}, mode: sink.ModeLegacy, chores: []string{"corrections"}},
		"reference, a legacy mapping": {cfg: sink.Config{Mode: sink.ModeReference, Mapping: legacy}, err: "reference mode reads couponlink's own tables, but the mapping names a legacy schema"},
		"legacy without a mapping":    {cfg: sink.Config{Mode: sink.ModeLegacy}, err: "legacy mode needs the mapping of the legacy tables"},
		"unknown mode":                {cfg: sink.Config{Mode: "shadow"}, err: `unknown mode "shadow" (want reference or legacy)`},
	} {
		tc.cfg.DB = db
		s, err := sink.New(tc.cfg)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, name)
			continue
		}
		require.NoError(t, err, name)
		require.Equal(t, tc.mode, s.Mode(), name)
		require.Equal(t, tc.chores, chores(s), name)
	}
}
