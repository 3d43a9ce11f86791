package sink_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

// undecodableEnv is the legacy schema with a nullable state and write-off
// coupon id, and a template of budget 1000.
func undecodableEnv(t *testing.T) (*legacyEnv, func(q string)) {
	l := newLegacyEnv(t)
	exec := func(q string) {
		t.Helper()
		_, err := l.DB.Exec(q)
		require.NoError(t, err, q)
	}
	exec(`ALTER TABLE ` + l.tq("t_user_coupon") + ` MODIFY state TINYINT NULL`)
	exec(`ALTER TABLE ` + l.tq("t_writeoff") + ` MODIFY coupon_id BIGINT NULL`)
	exec(`INSERT INTO ` + l.tq("t_coupon_tpl") + ` (id, budget) VALUES (1, 1000)`)
	return l, exec
}

// Rows with a NULL state or a code the mapping does not name, among valid
// ones: the cdc goes on, the counters equal the truth (which skips them),
// and each undecodable row change is one undecodable_row anomaly, once,
// also across a restart that replays from the checkpoint.
func TestLegacyUndecodableRows(t *testing.T) {
	l, exec := undecodableEnv(t)
	uc, wo := l.tq("t_user_coupon"), l.tq("t_writeoff")
	// before the first start: the bootstrap skips them and records nothing
	exec(`INSERT INTO ` + uc + ` (tpl_id, source, state, uid) VALUES (1, 'app', 0, 'a'), (1, 'app', NULL, 'b'), (1, 'h5', 7, 'c'), (1, 'h5', 1, 'd')`)
	c := l.StartCDC(l.mapping())
	l.WaitCheckpoint()
	require.Equal(t, l.legacyTruth(), l.Counters(), "bootstrap")

	exec(`INSERT INTO ` + uc + ` (tpl_id, source, state, uid) VALUES (1, 'app', 0, 'e'), (1, 'app', NULL, 'f'), (1, 'app', 5, 'g'), (1, 'h5', 0, 'h')`) // 2
	exec(`UPDATE ` + uc + ` SET state = NULL WHERE uid = 'a'`)                                                                                          // 1: leaves the counted set
	exec(`UPDATE ` + uc + ` SET state = 0 WHERE uid = 'c'`)                                                                                             // enters it
	exec(`DELETE FROM ` + uc + ` WHERE uid = 'g'`)                                                                                                      // nothing was counted
	exec(`INSERT INTO ` + wo + ` (coupon_id, order_no) VALUES (NULL, 'o1')`)                                                                            // 1
	l.WaitCheckpoint()
	require.Equal(t, l.legacyTruth(), l.Counters(), "counters differ from the truth that skips undecodable rows")
	require.Equal(t, map[string]int{inventory.AnomalyUndecodableRow: 4}, l.anomalies())
	var detail string
	require.NoError(t, l.DB.QueryRow(`SELECT detail FROM cdc_anomaly WHERE detail LIKE '%.t_writeoff %'`).Scan(&detail))
	require.Contains(t, detail, l.schema+".t_writeoff row ")
	require.Contains(t, detail, ": coupon_id is NULL")

	// written while the cdc is down, replayed from the checkpoint at start
	c.Stop(t)
	exec(`INSERT INTO ` + uc + ` (tpl_id, source, state, uid) VALUES (1, 'app', 0, 'i'), (1, 'app', 8, 'j')`) // 1
	l.StartCDC(l.mapping())
	l.WaitCheckpoint()
	require.Equal(t, l.legacyTruth(), l.Counters(), "after the restart")
	require.Equal(t, map[string]int{inventory.AnomalyUndecodableRow: 5}, l.anomalies(), "after the restart")
}

// With Strict, the daemon stops at the first undecodable row, saying which.
func TestLegacyUndecodableStrict(t *testing.T) {
	l, exec := undecodableEnv(t)
	c := l.StartCDC(l.mapping(), func(cfg *sink.Config, _ *sink.Daemon) { cfg.Strict = true })
	l.WaitCheckpoint()
	exec(`INSERT INTO ` + l.tq("t_user_coupon") + ` (tpl_id, source, state, uid) VALUES (1, 'app', 0, 'a'), (1, 'app', NULL, 'b')`)
	err := c.Result(t, 30*time.Second)
	require.ErrorIs(t, err, sink.ErrUndecodableRow)
	require.ErrorContains(t, err, l.schema+".t_user_coupon row ")
	require.ErrorContains(t, err, ": state is NULL")
	require.Empty(t, l.anomalies(), "a strict cdc records nothing for the row it stops at")
}
