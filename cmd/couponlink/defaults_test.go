package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/couponlink/couponlink/internal/testenv"
)

// No command has a built-in database: without COUPONLINK_MYSQL_DSN (or
// -dsn) each one that needs it ends non-zero saying which variable to set,
// never reaching a development server by accident.
func TestNoBuiltInDatabase(t *testing.T) {
	bin := testenv.BuildCouponlink(t)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "COUPONLINK_") {
			env = append(env, kv)
		}
	}
	for _, args := range [][]string{{"migrate"}, {"api", "-addr", "127.0.0.1:0"}, {"expire"}, {"cdc", "-metrics-addr", ""},
		{"reconcile", "-once"}, {"status"}, {"anomalies", "list"}, {"quota", "policy", "show", "-template", "1"}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		assert.Error(t, err, "couponlink %v started without a database:\n%s", args, out)
		assert.Contains(t, string(out), "set COUPONLINK_MYSQL_DSN", "couponlink %v", args)
	}
}
