package main

import (
	"fmt"
	"os"
	"runtime/debug"
)

// cdcGCPercent is the garbage collector's target of `couponlink cdc`
// unless GOGC is set in its environment. The cdc's live heap is small
// (tens of MiB) and every binlog row image it decodes is garbage soon
// after: at Go's default of 100 it collects so often that the binary
// caught up a 1M-row backlog at 0.75 of a no-op reader; at 400, 0.88 and
// 0.91 (two quiet `make bench` runs each), for a VmRSS of ~75 MiB instead
// of ~35–40 MiB (docs/performance.md).
const cdcGCPercent = 400

// tuneCDCGC sets cdcGCPercent unless GOGC is set; it returns the GOGC in
// force, for the start-up log.
func tuneCDCGC() (gogc string) {
	if v := os.Getenv("GOGC"); v != "" {
		return v + " (GOGC)"
	}
	debug.SetGCPercent(cdcGCPercent)
	return fmt.Sprintf("%d (couponlink cdc's default; GOGC sets another)", cdcGCPercent)
}
