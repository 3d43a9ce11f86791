package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/sink"
)

// A legacy campaign's quota policy in signal mode: set through the API in
// couponlink's own database, evaluated by the leading cdc on the shop's
// channels (its per-channel budgets and the cdc's counts), each
// recommendation sent as a quota.recommendation event with its log row;
// the preview answers what the cdc then sends; auto is refused; the shop's
// tables are never written.

// budgetMappingYAML is shopMappingYAML with the shop's per-channel budgets.
const budgetMappingYAML = `channel_quota: {table: t_channel_budget, template: tpl_id, channel: get_type, quota: quota, claimed: claimed}
`

// hookReceiver collects the webhook events sent to it.
type hookReceiver struct {
	mu     sync.Mutex
	events []map[string]any
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ev map[string]any
	b, _ := io.ReadAll(r.Body)
	if json.Unmarshal(b, &ev) == nil {
		h.mu.Lock()
		h.events = append(h.events, ev)
		h.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
}

// of is the events of type typ received.
func (h *hookReceiver) of(typ string) []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]any
	for _, ev := range h.events {
		if ev["type"] == typ {
			out = append(out, ev)
		}
	}
	return out
}

// sendJSON sends body to the API with method and decodes the answer.
func sendJSON(t *testing.T, method, url string, body any) (int, map[string]any) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(method, url, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var v map[string]any
	require.NoError(t, json.NewDecoder(res.Body).Decode(&v))
	return res.StatusCode, v
}

func TestLegacyQuotaPolicySignal(t *testing.T) {
	db, dsn := testenv.MySQL(t)
	s := newShop(t, db)
	s.exec(`CREATE TABLE ` + s.tq("t_channel_budget") + ` (tpl_id BIGINT NOT NULL, get_type TINYINT NOT NULL, quota INT NOT NULL,
		claimed INT NOT NULL, PRIMARY KEY (tpl_id, get_type))`)
	b, err := os.ReadFile(s.mapping)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(s.mapping, append(b, budgetMappingYAML...), 0o600))
	s.exec(`INSERT INTO ` + s.tq("t_coupon_tpl") + ` VALUES (7, 'autumn-5off', 25, 25, 0, '2099-01-01 00:00:00')`)
	s.exec(`INSERT INTO ` + s.tq("t_channel_budget") + ` VALUES (7, 0, 20, 0), (7, 1, 5, 0)`)
	claim := func(channel int) int64 { // as the shop claims: its budget's guard, then the coupon
		s.exec(`UPDATE `+s.tq("t_channel_budget")+` SET claimed = claimed + 1 WHERE tpl_id = 7 AND get_type = ? AND claimed < quota`, channel)
		return s.claim(7, channel, 0, "u")
	}
	// back office (0) redeems badly: 10 claims, 1 used; self-service (1)
	// is sold out and redeems well: 5 claims, 4 used
	for i := range 10 {
		id := claim(0)
		if i == 0 {
			s.use(id, "o-back")
		}
	}
	for i := range 5 {
		id := claim(1)
		if i < 4 {
			s.use(id, fmt.Sprintf("o-self-%d", i))
		}
	}

	hooks := &hookReceiver{}
	receiver := httptest.NewServer(hooks)
	t.Cleanup(receiver.Close)
	c := startCDC(t, "-dsn", dsn, "-redis", "", "-mapping", s.mapping, "-rebalance-every", "100ms",
		"-webhook-url", receiver.URL, "-webhook-secret", "legacy-secret")
	base := legacyAPI(t, dsn, s.mapping)
	tpl := base + "/v1/legacy/templates/7"

	counted := func() bool {
		var n int64
		return db.QueryRow(`SELECT COALESCE(SUM(used), 0) FROM inventory_counter WHERE template_id = 7`).Scan(&n) == nil && n == 5
	}
	cdctest.WaitFor(t, 30*time.Second, "the cdc counts the shop's coupons", counted)
	shopSum := func() string {
		var out []string
		rows, err := db.Query(`CHECKSUM TABLE ` + s.tq("t_coupon_tpl") + `, ` + s.tq("t_user_coupon") + `, ` + s.tq("t_writeoff") + `, ` + s.tq("t_channel_budget"))
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var table string
			var sum *int64
			require.NoError(t, rows.Scan(&table, &sum))
			require.NotNil(t, sum, table)
			out = append(out, fmt.Sprintf("%s=%d", table, *sum))
		}
		require.NoError(t, rows.Err())
		return strings.Join(out, ",")
	}
	before := shopSum()

	// the defaults (min_claims 100) recommend nothing: the preview says so
	code, p := sendJSON(t, http.MethodPost, tpl+"/quota-policy/preview", nil)
	require.Equal(t, http.StatusOK, code, p)
	assert.Contains(t, p["stop"], "no channel redeems below low")
	assert.Contains(t, p["unknown"], "age: the mapping names no creation time of a campaign, so min_age is not applied")

	// auto is refused, in a change and in a preview
	change := map[string]any{"mode": "auto", "changed_by": "ops-1", "reason": "TICKET-44"}
	for _, path := range []string{"/quota-policy", "/quota-policy/preview"} {
		method := map[bool]string{true: http.MethodPut, false: http.MethodPost}[path == "/quota-policy"]
		code, v := sendJSON(t, method, tpl+path, change)
		require.Equal(t, http.StatusConflict, code, v)
		e := v["error"].(map[string]any)
		assert.Equal(t, "legacy_policy_refused", e["code"])
		assert.Equal(t, "mode", e["field"])
		assert.Contains(t, e["message"], "couponlink never writes the shop's tables")
	}

	// the preview of the signal policy, then the policy set: the cdc sends
	// what the preview said
	signal := map[string]any{"mode": "signal", "min_claims": 4, "low": 0.3, "high": 0.6, "min_age_seconds": 0, "cooldown_seconds": 3600,
		"changed_by": "ops-1", "reason": "TICKET-45"}
	code, preview := sendJSON(t, http.MethodPost, tpl+"/quota-policy/preview", signal)
	require.Equal(t, http.StatusOK, code, preview)
	require.Equal(t, "", preview["stop"], preview)
	assert.Equal(t, []any{map[string]any{"from": "0", "to": "1", "amount": 5.0, "why": preview["moves"].([]any)[0].(map[string]any)["why"]}}, preview["moves"])
	chans := preview["channels"].([]any)
	require.Len(t, chans, 2)
	assert.Equal(t, true, chans[1].(map[string]any)["sold_out"], chans[1])
	assert.Equal(t, "giver", chans[0].(map[string]any)["role"])
	assert.Equal(t, "receiver", chans[1].(map[string]any)["role"])

	code, v := sendJSON(t, http.MethodPut, tpl+"/quota-policy", signal)
	require.Equal(t, http.StatusOK, code, v)
	assert.Equal(t, "signal", v["effective"].(map[string]any)["mode"])
	code, hist := sendJSON(t, http.MethodGet, tpl+"/quota-policy/history?limit=5", nil)
	require.Equal(t, http.StatusOK, code, hist)
	entries := hist["entries"].([]any)
	require.Len(t, entries, 1, "the refused auto left no entry")
	e := entries[0].(map[string]any)
	assert.Equal(t, []any{"ops-1", "TICKET-45", "api"}, []any{e["changed_by"], e["reason"], e["source"]})
	assert.Equal(t, "signal", e["after"].(map[string]any)["mode"])
	for q, field := range map[string]string{"limit=0": "limit", "since=1": "since"} {
		code, bad := sendJSON(t, http.MethodGet, tpl+"/quota-policy/history?"+q, nil)
		assert.Equal(t, http.StatusBadRequest, code, bad)
		assert.Equal(t, field, bad["error"].(map[string]any)["field"], bad)
	}
	var sent []map[string]any
	cdctest.WaitFor(t, 30*time.Second, "the cdc sends the recommendation", func() bool {
		sent = hooks.of("quota.recommendation")
		return len(sent) > 0
	})
	require.Len(t, sent, 1)
	data := sent[0]["data"].(map[string]any)
	assert.Equal(t, 7.0, sent[0]["template"])
	assert.Equal(t, preview["moves"], data["moves"])
	assert.Equal(t, preview["rule"], data["rule"])
	assert.Equal(t, preview["total"], data["total"])
	assert.Equal(t, true, data["legacy"])
	var logged, amount int64
	var mode, from, to string
	require.NoError(t, db.QueryRow(`SELECT COUNT(*), MAX(mode), MAX(from_channel), MAX(to_channel), MAX(amount) FROM quota_transfer_log WHERE template_id = 7`).
		Scan(&logged, &mode, &from, &to, &amount))
	assert.Equal(t, []any{int64(1), "signal", "0", "1", int64(5)}, []any{logged, mode, from, to, amount})
	metrics := scrape(t, c.url+"/metrics")
	assert.Contains(t, metrics, `couponlink_quota_recommendations_total{template="7"} 1`)

	// within the cooldown: the preview says so, and nothing more is sent
	code, again := sendJSON(t, http.MethodPost, tpl+"/quota-policy/preview", nil)
	require.Equal(t, http.StatusOK, code, again)
	assert.Contains(t, again["stop"], "within the cooldown")
	assert.NotNil(t, again["last_decision"])
	assert.Equal(t, before, shopSum(), "the shop's tables are never written")
	assert.Len(t, hooks.of("quota.recommendation"), 1)

	// back to the defaults: who and why are needed, the override goes,
	// the history says so
	code, bad := sendJSON(t, http.MethodDelete, tpl+"/quota-policy?reason=TICKET-47", nil)
	require.Equal(t, http.StatusBadRequest, code, bad)
	code, reset := sendJSON(t, http.MethodDelete, tpl+"/quota-policy?changed_by=ops-2&reason=TICKET-47", nil)
	require.Equal(t, http.StatusOK, code, reset)
	assert.Equal(t, map[string]any{}, reset["override"], reset)
	assert.Equal(t, 0.0, reset["version"], "no override row")
	assert.Equal(t, reset["defaults"].(map[string]any)["min_claims"], reset["effective"].(map[string]any)["min_claims"])
	code, hist = sendJSON(t, http.MethodGet, tpl+"/quota-policy/history", nil)
	require.Equal(t, http.StatusOK, code, hist)
	require.Len(t, hist["entries"], 2)
	newest := hist["entries"].([]any)[0].(map[string]any)
	assert.Equal(t, []any{"reset", "ops-2", "TICKET-47"}, []any{newest["action"], newest["changed_by"], newest["reason"]})
	assert.Equal(t, before, shopSum(), "the shop's tables are never written")
}

// scrape is a /metrics page.
func scrape(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(b)
}

// Over two sources: the policy is kept on the judge's server (east, the
// first source), only the judge's cdc decides, on the counts summed over
// both sources, and the preview sums them too.
func TestLegacyQuotaPolicyOverTwoSources(t *testing.T) {
	s := newSpreadShop(t)
	for _, srv := range []*spreadServer{s.east, s.west} { // the budgets: a copy on every source
		srv.exec(`CREATE DATABASE common`)
		srv.exec(`CREATE TABLE common.channel_budget (tpl_id BIGINT NOT NULL, source VARCHAR(32) NOT NULL, quota INT NOT NULL,
			claimed INT NOT NULL, PRIMARY KEY (tpl_id, source))`)
		srv.exec(`INSERT INTO common.channel_budget VALUES (1, 'app', 20, 10), (1, 'web', 5, 5)`)
	}
	b, err := os.ReadFile(s.mapping)
	require.NoError(t, err)
	yaml := string(b) + "channel_quota: {table: common.channel_budget, template: tpl_id, channel: source, quota: quota, claimed: claimed}\n"
	require.NoError(t, os.WriteFile(s.mapping, []byte(yaml), 0o600))
	code, out, errs := cli(t, "migrate", "-mapping", s.mapping)
	require.Equal(t, 0, code, errs+out)
	// app: 10 claims, 1 used; web: 5 claims, 4 used; users 0-3 on east, 4-7 on west
	for u := range int64(10) {
		id := s.claim(1, "app", u)
		if u == 5 {
			s.use(id, u)
		}
	}
	for u := range int64(5) {
		id := s.claim(1, "web", u+2)
		if u > 0 {
			s.use(id, u+2)
		}
	}
	all, err := canal.ReadMappingFile(s.mapping)
	require.NoError(t, err)
	signalled := func(name string) func(c *sink.Config) { // as `couponlink cdc -source NAME` runs it
		peers, err := peersOf(all, name)
		require.NoError(t, err)
		t.Cleanup(func() { closePeers(peers) })
		return func(c *sink.Config) { c.RebalanceEvery, c.Webhooks, c.Peers = 100*time.Millisecond, true, peers }
	}
	s.startCDC(s.east, signalled("east"))
	s.startCDC(s.west, signalled("west"))
	s.east.caughtUp(t)
	s.west.caughtUp(t)
	base := legacyAPI(t, s.east.dsn, s.mapping)
	tpl := base + "/v1/legacy/templates/1"

	signal := map[string]any{"mode": "signal", "min_claims": 4, "min_age_seconds": 0, "changed_by": "ops-1", "reason": "TICKET-46"}
	code, preview := sendJSON(t, http.MethodPost, tpl+"/quota-policy/preview", signal)
	require.Equal(t, http.StatusOK, code, preview)
	require.Equal(t, "", preview["stop"], preview)
	chans := preview["channels"].([]any)
	require.Len(t, chans, 2)
	assert.Equal(t, []any{10.0, 5.0}, []any{chans[0].(map[string]any)["claims"], chans[1].(map[string]any)["claims"]}, "summed over both sources")
	assert.Equal(t, []any{map[string]any{"from": "app", "to": "web", "amount": 5.0, "why": preview["moves"].([]any)[0].(map[string]any)["why"]}}, preview["moves"])

	code, v := sendJSON(t, http.MethodPut, tpl+"/quota-policy", map[string]any{"mode": "auto", "changed_by": "ops-1", "reason": "x"})
	require.Equal(t, http.StatusConflict, code, v)
	code, v = sendJSON(t, http.MethodPut, tpl+"/quota-policy", signal)
	require.Equal(t, http.StatusOK, code, v)

	logged := func(srv *spreadServer) (n int64, seen string) {
		require.NoError(t, srv.db.QueryRow(`SELECT COUNT(*), COALESCE(MAX(rates_seen), '') FROM couponlink.quota_transfer_log WHERE template_id = 1`).Scan(&n, &seen))
		return n, seen
	}
	cdctest.WaitFor(t, 60*time.Second, "the judge's cdc recommends", func() bool { n, _ := logged(s.east); return n > 0 })
	n, seen := logged(s.east)
	assert.EqualValues(t, 1, n)
	var rates struct {
		Channels []struct {
			Channel string `json:"channel"`
			Held    int64  `json:"held"`
			Used    int64  `json:"used"`
		} `json:"channels"`
	}
	require.NoError(t, json.Unmarshal([]byte(seen), &rates))
	assert.Equal(t, "app 9 1, web 1 4", fmt.Sprintf("%s %d %d, %s %d %d", rates.Channels[0].Channel, rates.Channels[0].Held, rates.Channels[0].Used,
		rates.Channels[1].Channel, rates.Channels[1].Held, rates.Channels[1].Used), "the judge decided on the sum")
	var outbox int64
	require.NoError(t, s.east.db.QueryRow(`SELECT COUNT(*) FROM couponlink.webhook_outbox WHERE event = 'quota.recommendation'`).Scan(&outbox))
	assert.EqualValues(t, 1, outbox)
	n, _ = logged(s.west)
	assert.EqualValues(t, 0, n, "only the judge's cdc decides")
	var policies int64
	require.NoError(t, s.west.db.QueryRow(`SELECT COUNT(*) FROM couponlink.quota_policy WHERE template_id = 1`).Scan(&policies))
	assert.EqualValues(t, 0, policies, "the policy is kept on the judge's server")
	code, hist := sendJSON(t, http.MethodGet, tpl+"/quota-policy/history", nil)
	require.Equal(t, http.StatusOK, code, hist)
	require.Len(t, hist["entries"], 1, "read from the judge's server")
	assert.Equal(t, "TICKET-46", hist["entries"].([]any)[0].(map[string]any)["reason"])

	s.west.maria.Stop(syscall.SIGKILL)
	code, v = sendJSON(t, http.MethodPost, tpl+"/quota-policy/preview", map[string]any{})
	assert.Equal(t, http.StatusServiceUnavailable, code, v)
}
