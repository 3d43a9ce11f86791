package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestStatementsPerOp(t *testing.T) {
	before := map[string]int64{"Com_stmt_prepare": 10, "Com_select": 5, "Com_begin": 1, "Com_set_option": 0}
	after := map[string]int64{"Com_stmt_prepare": 50, "Com_stmt_close": 40, "Com_select": 25, "Com_begin": 11, "Com_commit": 10, "Com_set_option": 10}
	// 20 selects + 10 begins + 10 commits + 10 SET TRANSACTION over 100 ops; prepares and closes are not statements run
	assert.InDelta(t, 0.5, statementsPerOp(before, after, 100), 1e-9)
	assert.Zero(t, statementsPerOp(nil, after, 100))
	assert.Zero(t, statementsPerOp(before, after, 0))
}

func TestCostTable(t *testing.T) {
	ran := loadResult{Ops: 90, All: 100, Took: time.Second, Per: opCost{DB: 80 * time.Microsecond, API: 100 * time.Microsecond, Gen: 50 * time.Microsecond, Statements: 0.6}}
	ceiling := loadResult{Ops: 100, All: 100, Took: time.Second, Per: opCost{DB: 90 * time.Microsecond, Gen: 27 * time.Microsecond, Statements: 1}}
	multi := loadResult{Ops: 100, All: 100, Took: time.Second, Per: opCost{DB: 400 * time.Microsecond, Gen: 40 * time.Microsecond, Statements: 1}}
	got := costTable([]namedRun{{"claims", ran, 0}, {"ceiling", ceiling, 0}, {"not run", loadResult{}, 0}, {"4-row ceiling, per row", multi, 4}})
	assert.Contains(t, got, "| claims | 90 | 80.0 µs | 100.0 µs | 50.0 µs | 0.60 |")
	assert.Contains(t, got, "| ceiling | 100 | 90.0 µs | — | 27.0 µs | 1.00 |")
	assert.NotContains(t, got, "not run")
	assert.Contains(t, got, "| 4-row ceiling, per row | 400 | 100.0 µs | — | 10.0 µs | 0.25 |")
}

func TestCPUsAllowed(t *testing.T) {
	got := cpusAllowed(os.Getpid())
	assert.NotEmpty(t, got)
	assert.False(t, strings.ContainsAny(got, " \t\n"), "%q", got)
	assert.Empty(t, cpusAllowed(-1))
}
