package main

import (
	"database/sql"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
)

// No error a library builds carries a secret out of couponlink, wherever
// it goes: with the webhook receiver, the event sink and the cdc's
// metrics and Redis unreachable, and each address holding a password or a token,
// the cdc's log at DEBUG (its own lines and go-retryablehttp's), the
// last_error the outbox and the sink position store, `status -json`, the
// cdc's GET /status and the API's GET /v1/cdc/status (which a viewer
// reads) show none of them.
func TestNoSecretInAnyErrorLeftBehind(t *testing.T) {
	db, dsn := testenv.MySQL(t)
	closed := testenv.FreeAddr(t)
	pw := passwords("api token", "hook user", "hook token", "hook secret", "sink", "metrics", "redis")
	t.Setenv("COUPONLINK_WEBHOOK_SECRET", pw["hook secret"])
	t.Setenv("COUPONLINK_EVENT_SINKS", "redis://:"+pw["sink"]+"@"+closed+"/0?stream=couponlink-events&name=events")
	t.Setenv("COUPONLINK_API_TOKEN", pw["api token"])
	t.Setenv("COUPONLINK_CDC_METRICS_URL", "http://prom:"+pw["metrics"]+"@"+closed+"/metrics")
	hookURL := "http://hook:" + pw["hook user"] + "@" + closed + "/in?token=" + pw["hook token"]
	check := func(what, out string) {
		t.Helper()
		for name, p := range pw {
			assert.NotContains(t, out, p, "%s shows the %s:\n%s", what, name, out)
		}
	}

	// one pending event: the webhook and the sink both try it and fail
	_, err := db.Exec("INSERT INTO webhook_outbox (event_id, event, body) VALUES (?, 'channel.low', '{}')", randomHex(16))
	require.NoError(t, err)
	c := startCDC(t, "-dsn", dsn, "-redis", "redis://default:"+pw["redis"]+"@"+closed, "-log-level", "debug", "-webhook-url", hookURL)
	stored := func(q string) string {
		var s sql.NullString
		if err := db.QueryRow(q).Scan(&s); err != nil && err != sql.ErrNoRows {
			t.Fatal(err)
		}
		return s.String
	}
	var hookErr, sinkErr string
	cdctest.WaitFor(t, 60*time.Second, "the webhook and the sink record their failures", func() bool {
		hookErr = stored("SELECT last_error FROM webhook_outbox WHERE last_error IS NOT NULL LIMIT 1")
		sinkErr = stored("SELECT last_error FROM event_sink_position WHERE last_error IS NOT NULL LIMIT 1")
		return hookErr != "" && sinkErr != ""
	})
	check("webhook_outbox.last_error", hookErr)
	check("event_sink_position.last_error", sinkErr)
	assert.Contains(t, hookErr, closed, "the stored error still says where it failed")

	check("the cdc's GET /status", get(t, c.url+"/status", ""))
	code, out, errs := cli(t, "status", "-dsn", dsn, "-json")
	require.Equal(t, 0, code, errs)
	check("status -json", out+errs)
	assert.Contains(t, out, closed, "status -json shows the failure")

	api := startInProcess(t, []string{"api", "-dsn", dsn, "-addr", "127.0.0.1:0", "-expire-interval", "0", "-log-level", "debug"},
		`msg="api listening".* addr=(\S+)`, "")
	served := get(t, api.url+"/v1/cdc/status", pw["api token"])
	check("the API's GET /v1/cdc/status", served)
	assert.Contains(t, served, "prom:xxxxx@", "/v1/cdc/status names the metrics address it could not read")
	require.Equal(t, 0, api.stop())
	check("the API's log", api.logs.String())

	require.Equal(t, 0, c.stop())
	logs := c.logs.String()
	check("the cdc's log", logs)
	assert.Contains(t, logs, "webhook delivery failed", "the cdc logs the failure")
	assert.Contains(t, logs, "Redis stock write failed", "the cdc logs the Redis it cannot reach")
	assert.Contains(t, logs, "level=DEBUG", "the cdc logged at DEBUG")
}

// get is the body of a GET of url (with a bearer token if one is given);
// it fails the test unless the answer is 200.
func get(t *testing.T, url, token string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, "GET %s: %s", url, b)
	return strings.TrimSpace(string(b))
}
