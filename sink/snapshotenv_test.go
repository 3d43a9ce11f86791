package sink_test

import "github.com/couponlink/couponlink/internal/cdcenv"

// COUPONLINK_SNAPSHOT_POSITION=lock (make test-portable) forces the
// snapshot-position path of Oracle MySQL on the MariaDB test server.
func init() { cdcenv.UseSnapshotMethodFromEnv() }
