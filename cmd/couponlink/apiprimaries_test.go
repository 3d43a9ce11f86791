package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
)

// primariesFile writes a list of two primaries on two new databases, the
// second's DSN in an environment variable, and returns the file and the
// databases.
func primariesFile(t *testing.T) (string, []*sql.DB) {
	t.Helper()
	db0, dsn0 := testenv.MySQL(t)
	db1, dsn1 := testenv.MySQL(t)
	t.Setenv("TEST_P1_DSN", dsn1)
	file := filepath.Join(t.TempDir(), "primaries.yaml")
	require.NoError(t, os.WriteFile(file, []byte(fmt.Sprintf("primaries:\n  - {name: p0, dsn: %q}\n  - {name: p1, dsn_env: TEST_P1_DSN}\n", dsn0)), 0o600))
	return file, []*sql.DB{db0, db1}
}

// `couponlink api -primaries` refuses to start on a primary whose ids
// break the rule (here: the ids of one primary, now listed as the first of
// two), naming the id, and on a list file with an unknown key.
func TestAPIPrimariesRefuses(t *testing.T) {
	file, dbs := primariesFile(t)
	_, err := dbs[0].Exec(`INSERT INTO coupon_template (id, name, total_quota, valid_seconds) VALUES (1, 'a', 1, 60), (2, 'b', 1, 60)`)
	require.NoError(t, err)
	code, _, stderr := cli(t, "api", "-primaries", file, "-addr", "127.0.0.1:0", "-expire-interval", "0")
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "primary p0 (0 of the list, from 0, of 2): coupon_template id 2 breaks the rule")

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("primaries: [{name: p0, dsn: \"root@tcp(a:1)/c\", weight: 1}]\n"), 0o600))
	t.Setenv("COUPONLINK_PRIMARIES", bad)
	code, _, stderr = cli(t, "api", "-addr", "127.0.0.1:0")
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "field weight not found")
}

// `couponlink api -primaries` serves the front over the primaries: new
// templates alternate between them, a claim lands on its template's
// primary, and /metrics labels each primary's series.
func TestAPIPrimariesServes(t *testing.T) {
	file, dbs := primariesFile(t)
	ctx, stop := context.WithCancel(context.Background())
	var out testenv.Output
	exited := make(chan int, 1)
	go func() {
		exited <- runContext(ctx, []string{"api", "-primaries", file, "-addr", "127.0.0.1:0", "-expire-interval", "1h"}, &out, &out)
	}()
	listening := regexp.MustCompile(`listening on (http://\S+)`)
	cdctest.WaitFor(t, 30*time.Second, "the api listens", func() bool { return listening.MatchString(out.String()) })
	url := listening.FindStringSubmatch(out.String())[1]

	post := func(path, body string) map[string]any {
		res, err := http.Post(url+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, res.StatusCode, "%s", b)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		return m
	}
	tpl := `{"name": "t", "total_quota": 5, "channels": {"app": 5}, "valid_seconds": 60}`
	assert.EqualValues(t, 1, post("/v1/templates", tpl)["id"])
	assert.EqualValues(t, 2, post("/v1/templates", tpl)["id"])
	c := post("/v1/claims", `{"template_id": 2, "user_id": "u", "channel": "app", "request_id": "r"}`)
	assert.EqualValues(t, 2, c["user_coupon_id"])
	var n int
	require.NoError(t, dbs[1].QueryRow("SELECT COUNT(*) FROM user_coupon WHERE id = 2 AND template_id = 2").Scan(&n))
	assert.Equal(t, 1, n, "the coupon is on p1")

	res, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(res.Body)
	require.NoError(t, res.Body.Close())
	require.NoError(t, err)
	assert.Contains(t, string(metrics), `couponlink_api_transitions_total{kind="claim",primary="p1"} 1`)
	assert.Contains(t, string(metrics), `primary="p0"`)

	stop()
	select {
	case code := <-exited:
		assert.Equal(t, 0, code, out.String())
	case <-time.After(30 * time.Second):
		t.Fatal("the api did not stop")
	}
}
