package main

import (
	"fmt"
	"os"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
)

// snapshotEnv names how the cdc's bootstrap and the reconciler's truth
// take a consistent snapshot's binlog position: auto (default), status
// (MariaDB/Percona binlog_snapshot_%), lock (FLUSH TABLES WITH READ LOCK,
// else LOCK TABLES on the mapped tables) or tables (LOCK TABLES only).
const snapshotEnv = "COUPONLINK_SNAPSHOT_POSITION"

// setSnapshotMethod reads snapshotEnv, for every command of the process.
func setSnapshotMethod() error {
	m, err := canal.ParseSnapshotMethod(os.Getenv(snapshotEnv))
	if err != nil {
		return fmt.Errorf("%s: %w", snapshotEnv, err)
	}
	inventory.SetSnapshotMethod(m)
	return nil
}
