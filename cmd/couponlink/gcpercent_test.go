package main

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// The cdc's GC target is 400 unless GOGC says otherwise, and GOGC is then
// left to the runtime.
func TestCDCGCPercent(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	t.Setenv("GOGC", "")
	require.Contains(t, tuneCDCGC(), "400")
	require.Equal(t, cdcGCPercent, debug.SetGCPercent(100), "set when GOGC is not")

	t.Setenv("GOGC", "150")
	require.Equal(t, "150 (GOGC)", tuneCDCGC())
	require.Equal(t, 100, debug.SetGCPercent(100), "left alone when GOGC is set")
}
