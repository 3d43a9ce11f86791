package httpapi_test

import (
	"slices"
	"testing"

	"github.com/couponlink/couponlink/internal/testenv"
)

// TestWriteAPIReadsThroughInventory: the HTTP API (and its router over
// several primaries) reaches the cdc's side, a legacy shop's mapping
// included, through the read model (inventory) only: it imports neither
// the binlog package nor the sink.
func TestWriteAPIReadsThroughInventory(t *testing.T) {
	banned := []string{"github.com/couponlink/couponlink/canal", "github.com/couponlink/couponlink/sink"}
	for _, dir := range []string{".", "route"} {
		for f, paths := range testenv.Imports(t, dir) {
			for _, path := range paths {
				if slices.Contains(banned, path) {
					t.Errorf("%s imports %s: the API reads the cdc's side through inventory", f, path)
				}
			}
		}
	}
}
