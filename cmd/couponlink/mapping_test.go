package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
)

// runBinary runs the built couponlink with args and the environment
// without couponlink's own settings, plus env; it returns the exit code
// and the output.
func runBinary(t *testing.T, bin string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "COUPONLINK_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), out.String(), errb.String()
	}
	require.NoError(t, err)
	return 0, out.String(), errb.String()
}

// `couponlink mapping check`, the built binary, on a shop's schema: what
// each role maps to and which checks are on and off; warnings only (a
// nullable status and budget) exit 0; a mapping the cdc would refuse or
// misread exits 1 saying why; no subcommand is a usage error (2).
func TestMappingCheckCommand(t *testing.T) {
	bin := testenv.BuildCouponlink(t)
	db, dsn := testenv.MySQL(t)
	s := newShop(t, db)

	code, out, errs := runBinary(t, bin, nil, "mapping", "check", "-dsn", dsn, "-mapping", s.mapping)
	require.Equal(t, 0, code, errs+out)
	assert.Regexp(t, `\n  user_coupon\.status +→ `+s.schema+`\.t_user_coupon\.use_status +\(tinyint\(4\), NULL allowed\)\n`, out)
	assert.Regexp(t, `\n  template\.remaining +→ `+s.schema+`\.t_coupon_tpl\.count +\(int\(11\), NULL allowed\)\n`, out)
	for _, want := range []string{
		"checks (redemption_evidence: table)",
		"  used_without_redemption: on — no write-off row of the coupon's order in " + s.schema + ".t_writeoff within -redemption-grace\n",
		"  duplicate_redemption: on — two rows of one (coupon, order) in " + s.schema + ".t_writeoff\n",
		"  double_spend: off — redemption_evidence is table: duplicate_redemption instead\n",
		"  over_issue: on — against template budget (" + s.schema + ".t_coupon_tpl.budget), followed from the binlog\n",
		"  per_user_limit_exceeded: on — " + s.schema + ".t_coupon_tpl.per_limit per " + s.schema + ".t_user_coupon.uid\n",
		"  stock_column_drift: on (reconciler) — " + s.schema + ".t_coupon_tpl.count against budget − taken\n",
		"  legacy_template_counts: off — no template.issued or template.used\n",
		"  - user_coupon.status (" + s.schema + ".t_user_coupon.use_status) allows NULL: undecodable rows are possible",
		"  - template.total_quota (" + s.schema + ".t_coupon_tpl.budget) allows NULL",
		"\nok, with 2 warnings\n",
	} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, "errors")
	assert.Empty(t, errs)

	// the mapping from the environment, as the cdc reads it; a missing index warned with its statement
	_, err := db.Exec("ALTER TABLE `" + s.schema + "`.`t_writeoff` DROP INDEX coupon_id")
	require.NoError(t, err)
	code, out, errs = runBinary(t, bin, []string{"COUPONLINK_MAPPING=" + s.mapping, "COUPONLINK_MYSQL_DSN=" + dsn}, "mapping", "check")
	require.Equal(t, 0, code, errs+out)
	assert.Contains(t, out, "  - redemption_log.table "+s.schema+".t_writeoff has no index on (coupon_id): used_without_redemption "+
		"looks up a coupon's write-off rows; add one: CREATE INDEX `idx_couponlink_coupon_id` ON `"+s.schema+"`.`t_writeoff` (`coupon_id`);\n")
	assert.Contains(t, out, "\nok, with 3 warnings\n")

	// a status in a text column and a missing column: errors, exit 1
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	yaml, err := os.ReadFile(s.mapping)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bad, []byte(strings.NewReplacer("status: use_status", "status: uid", "name: name", "name: title").
		Replace(string(yaml))), 0o600))
	code, out, errs = runBinary(t, bin, nil, "mapping", "check", "-dsn", dsn, "-mapping", bad)
	assert.Equal(t, 1, code, errs+out)
	assert.Contains(t, out, "\nerrors\n")
	assert.Contains(t, out, "  - mapping: user_coupon.status names "+s.schema+".t_user_coupon.uid, a varchar(64) column; it must be an integer column")
	assert.Contains(t, out, `  - mapping: template.name names column "title" but `+s.schema+".t_coupon_tpl has no such column")
	assert.Contains(t, out, "\n2 errors, ")
	assert.Equal(t, "couponlink mapping check: 2 errors in "+bad+" (see above)\n", errs)

	// a mapping that does not even load: exit 1 with the reason
	require.NoError(t, os.WriteFile(bad, append(yaml, []byte("statsu: {}\n")...), 0o600))
	code, out, errs = runBinary(t, bin, nil, "mapping", "check", "-dsn", dsn, "-mapping", bad)
	assert.Equal(t, 1, code, errs+out)
	assert.Contains(t, out, "field statsu not found")
	assert.Contains(t, errs, "the mapping is refused")

	// the front end's claimed set: listed as a check; one set per template
	require.NoError(t, os.WriteFile(bad, append(yaml, []byte("redis: {claimed_users: 'shop:coupon:{template}:users'}\n")...), 0o600))
	code, out, errs = runBinary(t, bin, nil, "mapping", "check", "-dsn", dsn, "-mapping", bad)
	assert.Equal(t, 0, code, errs+out)
	assert.Contains(t, out, "  redis_claimed_users: on (reconciler) — the front end's per-user claimed sets")
	require.NoError(t, os.WriteFile(bad, append(yaml, []byte("redis: {claimed_users: 'shop:coupon:users'}\n")...), 0o600))
	code, out, errs = runBinary(t, bin, nil, "mapping", "check", "-dsn", dsn, "-mapping", bad)
	assert.Equal(t, 1, code, errs+out)
	assert.Contains(t, out, `redis.claimed_users: "shop:coupon:users" has no {template}: the set is per template`)

	code, _, errs = runBinary(t, bin, nil, "mapping")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "usage: couponlink mapping check -mapping FILE")
	code, out, _ = runBinary(t, bin, nil, "help")
	assert.Equal(t, 0, code)
	assert.Regexp(t, `\n  mapping +check a legacy mapping against the live schema`, out)
}
