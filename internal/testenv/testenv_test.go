package testenv

import "testing"

func TestMySQLIsMigrated(t *testing.T) {
	db, _ := MySQL(t)
	for _, table := range []string{"coupon_template", "channel_quota", "user_coupon", "redemption_log",
		"inventory_flow", "inventory_counter", "cdc_checkpoint", "reconcile_task", "correction_log", "quota_transfer_log"} {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&n); err != nil {
			t.Errorf("table %s: %v", table, err)
		}
	}
	var format string
	if err := db.QueryRow("SELECT @@binlog_format").Scan(&format); err != nil || format != "ROW" {
		t.Errorf("binlog_format = %q (%v), want ROW", format, err)
	}
}
