package coupon

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
)

// The group transaction of the claim combiner, called directly so that the
// group's members are exactly the test's (under HTTP load the grouping is
// up to the arrival times).

func groupStore(t testing.TB) (*Store, *sql.DB) {
	t.Helper()
	db, _ := testenv.MySQL(t)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := New(Config{DB: db, Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	return s, db
}

func groupTemplate(t testing.TB, s *Store, quota, perUser int64) int64 {
	t.Helper()
	tpl, err := s.CreateTemplate(context.Background(), NewTemplate{Name: "g", TotalQuota: quota,
		Channels: map[string]int64{"app": quota}, ValidSeconds: 3600, PerUserLimit: perUser})
	require.NoError(t, err)
	return tpl.ID
}

// groupCalls are claims of the bucket (tpl, app) by users[i] with request ids reqs[i].
func groupCalls(t *testing.T, s *Store, tpl int64, users, reqs []string) []*claimCall {
	t.Helper()
	channels := make([]string, len(users))
	for i := range channels {
		channels[i] = "app"
	}
	return groupCallsIn(t, s, tpl, channels, users, reqs)
}

// groupCallsIn are claims of the buckets (tpl, channels[i]) by users[i] with request ids reqs[i].
func groupCallsIn(t *testing.T, s *Store, tpl int64, channels, users, reqs []string) []*claimCall {
	t.Helper()
	rules, err := s.templateRules(context.Background(), tpl)
	require.NoError(t, err)
	out := make([]*claimCall, len(users))
	for i := range users {
		req := ClaimRequest{TemplateID: tpl, UserID: users[i], Channel: channels[i], RequestID: reqs[i]}
		require.NoError(t, req.Validate())
		out[i] = &claimCall{member: newMember(context.Background()), req: req, rules: rules}
	}
	return out
}

// runGroup runs the group, then answers each member left solo as the
// combiner does, and returns each member's answer and its code ("ok",
// "replay" or the error code).
func runGroup(s *Store, group []*claimCall) ([]Claim, []string) {
	s.runClaimGroup(context.Background(), group)
	claims := make([]Claim, len(group))
	codes := make([]string, len(group))
	for i, c := range group {
		settle(s, c)
		claims[i], codes[i] = answerCode(c.out, c.err)
	}
	return claims, codes
}

func answerCode(c Claim, err error) (Claim, string) { return c, code(err, c.Replayed) }

// code names an answer: "ok", "replay" or the error code.
func code(err error, replayed bool) string {
	var e *Error
	switch {
	case err == nil && replayed:
		return "replay"
	case err == nil:
		return "ok"
	case errors.As(err, &e):
		return string(e.Code)
	default:
		return err.Error()
	}
}

// Three slots, six claims: the first three in arrival order win, in spite
// of a per-user limit of 2 for u1 (its third claim is limit_reached, not
// sold_out, as on the single path), and a request_id twice in the group is
// one coupon answered twice, the second time as a replay.
func TestClaimGroupArrivalOrder(t *testing.T) {
	s, db := groupStore(t)
	tpl := groupTemplate(t, s, 3, 2)
	group := groupCalls(t, s, tpl,
		[]string{"u1", "u1", "u1", "u2", "u2", "u3"},
		[]string{"r1", "r2", "r3", "r4", "r4", "r5"})
	claims, codes := runGroup(s, group)
	assert.Equal(t, []string{"ok", "ok", "limit_reached", "ok", "replay", "sold_out"}, codes)
	ids := map[int64]bool{claims[0].UserCouponID: true, claims[1].UserCouponID: true, claims[3].UserCouponID: true}
	assert.Len(t, ids, 3, "each request its own coupon")
	dup := claims[4]
	dup.Replayed = false
	assert.Equal(t, claims[3], dup, "the duplicate request_id gets the same coupon")
	for i, rid := range []string{"r1", "r2", "r4"} {
		var id int64
		require.NoError(t, db.QueryRow(`SELECT id FROM user_coupon WHERE request_id = ?`, rid).Scan(&id))
		assert.Equal(t, claims[[]int{0, 1, 3}[i]].UserCouponID, id, "the answered id is the coupon of its request_id")
	}
	var claimed int
	require.NoError(t, db.QueryRow(`SELECT claimed FROM channel_quota WHERE template_id = ?`, tpl).Scan(&claimed))
	assert.Equal(t, 3, claimed)

	// a replay of a committed claim, and an idempotency conflict, in a new group
	again := groupCalls(t, s, tpl, []string{"u1", "u9"}, []string{"r1", "r1"})
	claims2, codes2 := runGroup(s, again)
	assert.Equal(t, []string{"replay", "idempotency_conflict"}, codes2)
	assert.Equal(t, claims[0].UserCouponID, claims2[0].UserCouponID)
	assert.Zero(t, s.ClaimFallbacks(), "answered by the groups, not by the fallback")
}

// The rows a group writes are the rows the single path writes for the same
// requests one after the other.
func TestClaimGroupWritesTheSingleRows(t *testing.T) {
	s, db := groupStore(t)
	users := []string{"a", "b", "a", "c", "b", "d", "a", "e"}
	reqs := func(p string) []string {
		out := make([]string, len(users))
		for i := range users {
			out[i] = fmt.Sprintf("%s-%d", p, i)
		}
		return out
	}
	single, grouped := groupTemplate(t, s, 5, 2), groupTemplate(t, s, 5, 2)
	var singleCodes []string
	for _, c := range groupCalls(t, s, single, users, reqs("x")) {
		_, code := answerCode(s.claimOne(context.Background(), c.req, c.rules))
		singleCodes = append(singleCodes, code)
	}
	_, groupCodes := runGroup(s, groupCalls(t, s, grouped, users, reqs("x-g")))
	assert.Equal(t, singleCodes, groupCodes)
	rows := func(tpl int64, prefix string) []string {
		return dumpRows(t, db, `SELECT CONCAT_WS('|', user_id, channel, status, claimed_at, expires_at, order_id, version,
			SUBSTRING(request_id, LENGTH(?) + 1)) FROM user_coupon WHERE template_id = ? ORDER BY id`, prefix, tpl)
	}
	assert.Equal(t, rows(single, "x"), rows(grouped, "x-g"))
	for _, q := range []string{
		`SELECT CONCAT_WS('|', user_id, claimed) FROM user_claim WHERE template_id = ? ORDER BY user_id`,
		`SELECT CONCAT_WS('|', channel, quota, claimed) FROM channel_quota WHERE template_id = ?`,
	} {
		assert.Equal(t, dumpRows(t, db, q, single), dumpRows(t, db, q, grouped), q)
	}
	assert.Zero(t, s.ClaimFallbacks(), "written by the group, not by the fallback")
}

func dumpRows(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	return testenv.Column[string](t, db, q, args...)
}

// A database error on the group rolls it back and every request runs alone
// on the single path, with the same answers.
func TestClaimGroupFallsBack(t *testing.T) {
	s, db := groupStore(t)
	tpl := groupTemplate(t, s, 2, 1)
	s.groupFault = func(string, int) error { return errors.New("injected: deadlock") }
	claims, codes := runGroup(s, groupCalls(t, s, tpl, []string{"u1", "u1", "u2", "u3"}, []string{"r1", "r2", "r3", "r4"}))
	assert.Equal(t, []string{"ok", "limit_reached", "ok", "sold_out"}, codes)
	assert.EqualValues(t, 1, s.ClaimFallbacks())
	assert.NotEqual(t, claims[0].UserCouponID, claims[2].UserCouponID)
	assert.Equal(t, []string{"2"}, dumpRows(t, db, `SELECT claimed FROM channel_quota WHERE template_id = ?`, tpl))
	assert.Equal(t, []string{"2"}, dumpRows(t, db, `SELECT COUNT(*) FROM user_coupon WHERE template_id = ?`, tpl))
}

// Another process counts u1's first claim after the group read the per-user
// rows (READ COMMITTED: a missing row is not locked): the group's insert of
// u1's row fails on the duplicate key, the group rolls back and falls back,
// and the single path answers u1 with limit_reached. Nothing is counted twice.
func TestClaimGroupUserRowRace(t *testing.T) {
	s, db := groupStore(t)
	tpl := groupTemplate(t, s, 10, 1)
	s.groupFault = func(stage string, _ int) error {
		if stage != "counted" {
			return nil
		}
		s.groupFault = nil
		_, err := db.Exec(`INSERT INTO user_claim (template_id, user_id, claimed) VALUES (?, 'u1', 1)`, tpl)
		return err
	}
	_, codes := runGroup(s, groupCalls(t, s, tpl, []string{"u1", "u2"}, []string{"r1", "r2"}))
	assert.Equal(t, []string{"limit_reached", "ok"}, codes)
	assert.EqualValues(t, 1, s.ClaimFallbacks(), "the duplicate key failed the group")
	assert.Equal(t, []string{"u1|1", "u2|1"}, dumpRows(t, db,
		`SELECT CONCAT_WS('|', user_id, claimed) FROM user_claim WHERE template_id = ? ORDER BY user_id`, tpl))
	assert.Equal(t, []string{"1"}, dumpRows(t, db, `SELECT claimed FROM channel_quota WHERE template_id = ?`, tpl))
}

// One group over several buckets of a template (the combiner queues claims
// per template): each bucket sells out on its own quota, a channel the
// template lacks is refused alone, the per-user limit counts across
// buckets, and the rows are those of the single path run one by one.
func TestClaimGroupOverBuckets(t *testing.T) {
	s, db := groupStore(t)
	template := func() int64 {
		tpl, err := s.CreateTemplate(context.Background(), NewTemplate{Name: "b", TotalQuota: 4,
			Channels: map[string]int64{"app": 2, "web": 1, "mini": 1}, ValidSeconds: 3600, PerUserLimit: 2})
		require.NoError(t, err)
		return tpl.ID
	}
	channels := []string{"web", "app", "web", "tv", "app", "mini", "app", "app", "mini"}
	users := []string{"u1", "u2", "u3", "u4", "u1", "u1", "u5", "u6", "u7"}
	reqs := func(p string) []string {
		out := make([]string, len(users))
		for i := range users {
			out[i] = fmt.Sprintf("%s-%d", p, i)
		}
		return out
	}
	single, grouped := template(), template()
	var singleCodes []string
	for _, c := range groupCallsIn(t, s, single, channels, users, reqs("s")) {
		_, code := answerCode(s.claimOne(context.Background(), c.req, c.rules))
		singleCodes = append(singleCodes, code)
	}
	_, groupCodes := runGroup(s, groupCallsIn(t, s, grouped, channels, users, reqs("g")))
	assert.Equal(t, []string{"ok", "ok", "sold_out", "invalid_argument", "ok", "limit_reached", "sold_out", "sold_out", "ok"}, groupCodes)
	assert.Equal(t, singleCodes, groupCodes)
	for _, q := range []string{
		`SELECT CONCAT_WS('|', channel, quota, claimed) FROM channel_quota WHERE template_id = ? ORDER BY channel`,
		`SELECT CONCAT_WS('|', user_id, claimed) FROM user_claim WHERE template_id = ? ORDER BY user_id`,
		`SELECT CONCAT_WS('|', user_id, channel, status) FROM user_coupon WHERE template_id = ? ORDER BY id`,
	} {
		assert.Equal(t, dumpRows(t, db, q, single), dumpRows(t, db, q, grouped), q)
	}
	assert.Equal(t, []string{"app|2|2", "mini|1|1", "web|1|1"}, dumpRows(t, db,
		`SELECT CONCAT_WS('|', channel, quota, claimed) FROM channel_quota WHERE template_id = ? ORDER BY channel`, grouped))
	assert.Zero(t, s.ClaimFallbacks(), "written by the group, not by the fallback")
}
