package reconcile_test

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

// The template table on east only (template.source: east; west has no
// database legacy at all): both cdcs run (west reads the table on east),
// a pass over the sources is clean with the template's own counts taken
// from east's table against the coupons of both servers, and the sum's
// over-issue is judged against east's budget.
func TestSourcesTemplateOnOneSource(t *testing.T) {
	s := newTwoSources(t)
	s.oneCopy = true
	s.west.exec("DROP DATABASE legacy")
	s.yaml = strings.Replace(s.yaml, "issued: issued, used: used}", "issued: issued, used: used, source: east}", 1)
	var err error
	s.m, err = canal.LoadMapping([]byte(s.yaml))
	require.NoError(t, err)
	s.template(1, 100)
	s.template(2, 10)
	for name, e := range map[string]*env{"east": s.east, "west": s.west} {
		sm, _, err := s.m.ForSource(name)
		require.NoError(t, err)
		peer, other := "west", s.west.DB
		if name == "west" {
			peer, other = "east", s.east.DB
		}
		pm, _, err := s.m.ForSource(peer)
		require.NoError(t, err)
		e.StartCDC(sm, func(cfg *sink.Config, _ *sink.Daemon) {
			cfg.Name, cfg.RedisMode = name, inventory.RedisOff
			cfg.Peers = []sink.Peer{{Name: peer, DB: other, Mapping: pm}}
		})
	}
	for _, server := range []string{"east", "west"} {
		c := s.claimOn(server, 1, 5)[1]
		s.redeem(1, c[0], c[1])
	}
	s.waitCDCs()
	s.setKey(1, 100-s.taken[1])
	r := s.reconciler(prometheus.NewRegistry())
	sr := s.pass(r)
	require.Equal(t, "clean", sr.Status(), "%v / %v / %v", sourced(sr.Parts[0].Differences), sourced(sr.Parts[1].Differences), sourced(sr.Sum.Differences))
	require.Equal(t, int64(10), sr.Sum.Coupons)

	s.claimOn("east", 2, 6)
	s.claimOn("west", 2, 6)
	s.setKey(2, 10-12)
	s.waitCDCs()
	sr = s.pass(r)
	require.Equal(t, []string{"all sources: quota 2/over_issue 10 12 needs_review"}, sourced(sr.Sum.Differences),
		"the budget on east judged on the sum; east's own counts equal both servers' coupons")
	var n int
	count := func() bool {
		require.NoError(t, s.east.DB.QueryRow(`SELECT COUNT(*) FROM cdc_anomaly WHERE kind = 'over_issue' AND template_id = 2`).Scan(&n))
		return n > 0
	}
	cdctest.WaitFor(t, 10*time.Second, "the cdc of east records the sum's over-issue", count)
	require.Equal(t, 1, n, "once")
	require.ErrorIs(t, s.west.DB.QueryRow(`SELECT id FROM cdc_anomaly`).Scan(&n), sql.ErrNoRows, "west's cdc judges no budget")
}
