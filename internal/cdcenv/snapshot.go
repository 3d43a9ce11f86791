package cdcenv

import (
	"os"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
)

// UseSnapshotMethodFromEnv sets the test process's snapshot-position
// method from COUPONLINK_SNAPSHOT_POSITION, as cmd/couponlink does for the
// binaries the tests start: `make test-portable` sets it to lock, the path
// of Oracle MySQL, forced on the MariaDB test server. A suite calls it
// from an init.
func UseSnapshotMethodFromEnv() {
	m, err := canal.ParseSnapshotMethod(os.Getenv("COUPONLINK_SNAPSHOT_POSITION"))
	if err != nil {
		panic(err) // a typo in the test environment: no test would mean anything
	}
	inventory.SetSnapshotMethod(m)
}
