package reconcile_test

import (
	"os"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
)

// COUPONLINK_SNAPSHOT_POSITION=lock (make test's second run of the
// bootstrap, crash and reconcile suites) forces the snapshot-position path
// of Oracle MySQL on the MariaDB test server: here in the test process,
// and in the couponlink binaries the tests start (cmd/couponlink reads it).
func init() {
	m, err := canal.ParseSnapshotMethod(os.Getenv("COUPONLINK_SNAPSHOT_POSITION"))
	if err != nil {
		panic(err)
	}
	inventory.SetSnapshotMethod(m)
}
