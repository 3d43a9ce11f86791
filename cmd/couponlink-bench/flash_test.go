package main

import (
	"strings"
	"testing"
	"time"
)

// TestFlashRows builds the flash phase's rows from made-up results: every
// column filled, no bad format, and a failed check fails the run.
func TestFlashRows(t *testing.T) {
	cfg, _, err := parseConfig(t, "-repo", "/r", "-smoke", "-phases", "flash")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.flashCoupons != 20 || cfg.flashClaims != 2000 || !cfg.runs("flash") || cfg.runs("api") {
		t.Fatalf("-smoke -phases flash: %+v", cfg)
	}
	b := flashBurst{took: time.Second, soldOut: 100 * time.Millisecond, firstRefusal: 90 * time.Millisecond, granted: 20, refused: 1980,
		grantLat: latStats{N: 20, P50: time.Millisecond}, refLat: latStats{N: 1980, P50: time.Millisecond}, cost: "per answer: …"}
	f := flashResult{on: b, off: b, peer: b, refusedFromMemory: 1900, redisZero: 120 * time.Millisecond,
		samples: []flashSample{{at: 20 * time.Millisecond, claimable: 5, redis: 7, cdcLag: 0}},
		checks:  [][2]string{{"couponlink api", "exactly 20 coupons"}, {"peer", "MISMATCH: stock 1"}}}
	var r Report
	r.flash(*cfg, f)
	if len(r.Rows) != 4 {
		t.Fatalf("%d rows, want 4", len(r.Rows))
	}
	for _, row := range r.Rows {
		if row.ID != "9" || row.Ours == "" || row.Settings == "" || row.Ratio == "" || strings.Contains(row.Ours+row.Peer+row.Settings, "%!") {
			t.Errorf("row %q: empty column or bad format in %+v", row.What, row)
		}
	}
	if !strings.Contains(r.Rows[3].Ours, "at most 2 coupons above") {
		t.Errorf("Redis behind MySQL: %q", r.Rows[3].Ours)
	}
	if len(r.Failures) != 1 || !strings.Contains(r.Failures[0], "MISMATCH") {
		t.Errorf("failures %q, want the peer's mismatch", r.Failures)
	}
}
