package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// checks records each invariant's checks: how often it held, how often
// not, and the first violation with the rows involved.
type checks struct {
	mu    sync.Mutex
	order []string
	res   map[string]*checkResult
}

type checkResult struct {
	passed, failed, skipped int
	first                   []string // the first violation's rows
}

func newChecks() *checks { return &checks{res: map[string]*checkResult{}} }

func (c *checks) at(name string) *checkResult {
	r := c.res[name]
	if r == nil {
		r = &checkResult{}
		c.res[name] = r
		c.order = append(c.order, name)
	}
	return r
}

// record notes one check of an invariant: rows are the violating rows
// (none: it held). Only the first 20 rows of the first violation are kept.
func (c *checks) record(name string, rows []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.at(name)
	if len(rows) == 0 {
		r.passed++
		return
	}
	r.failed++
	if r.first == nil {
		if len(rows) > 20 {
			rows = append(rows[:20:20], fmt.Sprintf("... and %d more", len(rows)-20))
		}
		r.first = rows
	}
}

// skip notes a check that could not run (a server down at a checkpoint).
func (c *checks) skip(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at(name).skipped++
}

// firstViolation is the first invariant (in the order checks were first
// recorded) that failed, with its rows; "" when every check held.
func (c *checks) firstViolation() (string, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.order {
		if r := c.res[n]; r.failed > 0 {
			return n, r.first
		}
	}
	return "", nil
}

// run runs one check function and records its result; an error (a query
// that failed) is a violation too: the checker could not prove it.
func (c *checks) run(ctx context.Context, name string, fn func(context.Context) ([]string, error)) {
	rows, err := fn(ctx)
	if err != nil {
		rows = append(rows, "check failed to run: "+err.Error())
	}
	c.record(name, rows)
}

// diffMaps lists the keys whose values differ between want and got.
func diffMaps[V comparable](wantName, gotName string, want, got map[string]V) []string {
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	var out []string
	for k := range keys {
		w, wok := want[k]
		g, gok := got[k]
		if w != g || wok != gok {
			out = append(out, fmt.Sprintf("%s: %s %v, %s %v", k, wantName, show(w, wok), gotName, show(g, gok)))
		}
	}
	sort.Strings(out)
	return out
}

func show[V any](v V, ok bool) string {
	if !ok {
		return "(none)"
	}
	return strings.TrimSpace(fmt.Sprintf("%+v", v))
}
