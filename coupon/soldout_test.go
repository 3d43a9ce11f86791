package coupon

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
)

// The sold-out memory (soldout.go): a bucket found sold out refuses further
// claims after one read, with no write; quota that comes back is claimed at
// once; replays and the per-user limit answer as before.

func memoryStore(t *testing.T, db *sql.DB, combine bool) *Store {
	t.Helper()
	s, err := New(Config{DB: db, SoldOutMemory: true, CombineClaims: combine, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	return s
}

func claimCode(s *Store, tpl int64, user, reqID string) (Claim, string) {
	c, err := s.Claim(context.Background(), ClaimRequest{TemplateID: tpl, UserID: user, Channel: "app", RequestID: reqID})
	return answerCode(c, err)
}

// writes is the session's count of statements and row operations that
// write, and the last transaction it wrote to the binlog: none of them
// moves on a read. The counts are the session's, not the server's, so the
// tests of other packages writing to the same server at the same time do
// not move them: db must be a pool of one connection (onePool) that the
// store under test uses too.
func writes(t *testing.T, db *sql.DB) string {
	t.Helper()
	out := ""
	rows, err := db.Query(`SHOW SESSION STATUS WHERE Variable_name IN
		('Com_insert', 'Com_update', 'Com_delete', 'Com_replace', 'Com_insert_select', 'Handler_write', 'Handler_update', 'Handler_delete', 'Com_commit', 'Com_rollback')`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var k, v string
		require.NoError(t, rows.Scan(&k, &v))
		out += k + "=" + v + " "
	}
	require.NoError(t, rows.Err())
	var gtid string
	var id int64
	require.NoError(t, db.QueryRow(`SELECT @@SESSION.last_gtid, CONNECTION_ID()`).Scan(&gtid, &id))
	return fmt.Sprintf("%sgtid=%s connection=%d", out, gtid, id)
}

// onePool is a pool of the test database that holds one connection, for
// its whole life, so that every statement of a store built on it and every
// writes(t, db) run in one session.
func onePool(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestSoldOutMemoryRefusesWithoutAWrite(t *testing.T) {
	for _, combine := range []bool{false, true} {
		t.Run(fmt.Sprintf("combine=%v", combine), func(t *testing.T) {
			_, dsn := testenv.MySQL(t)
			db := onePool(t, dsn)
			s := memoryStore(t, db, combine)
			tpl := groupTemplate(t, s, 3, 1)
			for i := range 3 {
				_, c := claimCode(s, tpl, fmt.Sprintf("u%d", i), fmt.Sprintf("r%d", i))
				require.Equal(t, "ok", c)
			}
			_, c := claimCode(s, tpl, "u3", "r3") // found sold out under the lock: remembered
			require.Equal(t, "sold_out", c)
			require.Zero(t, s.ClaimsRefusedFromMemory())

			before := writes(t, db)
			for i := 4; i < 24; i++ {
				_, err := s.Claim(context.Background(), ClaimRequest{TemplateID: tpl, UserID: fmt.Sprintf("u%d", i), Channel: "app", RequestID: fmt.Sprintf("r%d", i)})
				e, ok := AsError(err)
				require.True(t, ok, "%v", err)
				// the answer the write path gives, word for word
				assert.Equal(t, conflictf("sold_out", `channel "app" of template %d is sold out (3 of 3 claimed)`, tpl), e)
			}
			assert.Equal(t, before, writes(t, db), "a refusal from the memory wrote")
			assert.EqualValues(t, 20, s.ClaimsRefusedFromMemory())

			// without the memory, the same refusal writes (and rolls back) or
			// locks: what the test above would have seen
			if !combine {
				off, err := New(Config{DB: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				require.NoError(t, err)
				before := writes(t, db)
				_, c := claimCode(off, tpl, "u99", "r99")
				require.Equal(t, "sold_out", c)
				assert.NotEqual(t, before, writes(t, db), "the write path's refusal left no trace: the assertion above cannot fail")
			}
		})
	}
}

func TestSoldOutMemoryGrantsQuotaThatCameBack(t *testing.T) {
	db, _ := testenv.MySQL(t)
	s := memoryStore(t, db, true)
	tpl := groupTemplate(t, s, 2, 1)
	for i := range 3 {
		claimCode(s, tpl, fmt.Sprintf("u%d", i), fmt.Sprintf("r%d", i))
	}
	_, c := claimCode(s, tpl, "u3", "r3")
	require.Equal(t, "sold_out", c)
	require.EqualValues(t, 1, s.ClaimsRefusedFromMemory(), "u2's claim was not the first sold_out: the memory did not refuse u3's")

	// quota comes back by a path the API does not see (an operator, a
	// transfer, a release): the very next claim is granted
	_, err := db.Exec(`UPDATE channel_quota SET quota = quota + 1 WHERE template_id = ? AND channel = 'app'`, tpl)
	require.NoError(t, err)
	_, c = claimCode(s, tpl, "u4", "r4")
	assert.Equal(t, "ok", c)
	_, c = claimCode(s, tpl, "u5", "r5")
	assert.Equal(t, "sold_out", c)

	// a released slot (claimed goes down) too
	_, err = db.Exec(`UPDATE channel_quota SET claimed = claimed - 1 WHERE template_id = ? AND channel = 'app'`, tpl)
	require.NoError(t, err)
	_, c = claimCode(s, tpl, "u6", "r6")
	assert.Equal(t, "ok", c)
	var claimed, quota int64
	require.NoError(t, db.QueryRow(`SELECT claimed, quota FROM channel_quota WHERE template_id = ?`, tpl).Scan(&claimed, &quota))
	assert.Equal(t, quota, claimed)
}

func TestSoldOutMemoryAnswersReplaysAndTheLimit(t *testing.T) {
	for _, combine := range []bool{false, true} {
		t.Run(fmt.Sprintf("combine=%v", combine), func(t *testing.T) {
			db, _ := testenv.MySQL(t)
			s := memoryStore(t, db, combine)
			tpl := groupTemplate(t, s, 2, 1)
			first, c := claimCode(s, tpl, "u0", "r0")
			require.Equal(t, "ok", c)
			claimCode(s, tpl, "u1", "r1")
			_, c = claimCode(s, tpl, "u2", "r2")
			require.Equal(t, "sold_out", c)
			_, c = claimCode(s, tpl, "u3", "r3")
			require.Equal(t, "sold_out", c)
			require.EqualValues(t, 1, s.ClaimsRefusedFromMemory(), "the bucket is not remembered: the cases below test nothing")

			// a retry of a granted claim is its replay, not sold_out
			again, c := claimCode(s, tpl, "u0", "r0")
			assert.Equal(t, "replay", c)
			assert.Equal(t, first.UserCouponID, again.UserCouponID)
			// its request_id for another claim: the conflict, as before
			_, c = claimCode(s, tpl, "u9", "r0")
			assert.Equal(t, "idempotency_conflict", c)
			// a user at the per-user limit: limit_reached comes first, as before
			_, c = claimCode(s, tpl, "u1", "r1-new")
			assert.Equal(t, "limit_reached", c)
			assert.EqualValues(t, 1, s.ClaimsRefusedFromMemory())
		})
	}
}

// Two API processes' stores, each with its own memory, claim one bucket
// while its quota is raised step by step: each raise is claimed (the bucket
// fills up again, within a deadline), every slot once, none twice.
func TestSoldOutMemoryTwoStoresNeverOverIssue(t *testing.T) {
	db, _ := testenv.MySQL(t)
	stores := []*Store{memoryStore(t, db, true), memoryStore(t, db, false)}
	tpl := groupTemplate(t, stores[0], 5, 1)
	const claimers, raises = 8, 10
	var wg sync.WaitGroup
	var stop atomic.Bool
	var mu sync.Mutex
	count := map[string]int{}
	for w := range claimers {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				u := fmt.Sprintf("w%d-%d", w, i)
				_, c := claimCode(stores[w%2], tpl, u, u)
				mu.Lock()
				count[c]++
				mu.Unlock()
			}
		})
	}
	full := func(quota int64) bool {
		var claimed int64
		require.NoError(t, db.QueryRow(`SELECT claimed FROM channel_quota WHERE template_id = ?`, tpl).Scan(&claimed))
		return claimed == quota
	}
	quota := int64(5)
	require.Eventually(t, func() bool { return full(quota) }, 30*time.Second, 5*time.Millisecond)
	for range raises {
		// wait until both memories refused a claim of the full bucket
		refused := stores[0].ClaimsRefusedFromMemory() + stores[1].ClaimsRefusedFromMemory()
		require.Eventually(t, func() bool {
			return stores[0].ClaimsRefusedFromMemory()+stores[1].ClaimsRefusedFromMemory() > refused+2
		}, 30*time.Second, time.Millisecond)
		_, err := db.Exec(`UPDATE channel_quota SET quota = quota + 2 WHERE template_id = ? AND channel = 'app'`, tpl)
		require.NoError(t, err)
		quota += 2
		require.Eventually(t, func() bool { return full(quota) }, 30*time.Second, 5*time.Millisecond,
			"the raised quota was not claimed: the memory hid it")
	}
	stop.Store(true)
	wg.Wait()
	var claimed, coupons int64
	require.NoError(t, db.QueryRow(`SELECT claimed, quota FROM channel_quota WHERE template_id = ?`, tpl).Scan(&claimed, &quota))
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM user_coupon WHERE template_id = ?`, tpl).Scan(&coupons))
	assert.EqualValues(t, 5+2*raises, quota)
	assert.Equal(t, quota, claimed)
	assert.EqualValues(t, claimed, coupons)
	assert.EqualValues(t, coupons, count["ok"], "answers %v", count)
	for c := range count {
		assert.Contains(t, []string{"ok", "sold_out"}, c, "answers %v", count)
	}
	t.Logf("answers %v, refused from memory %d + %d", count, stores[0].ClaimsRefusedFromMemory(), stores[1].ClaimsRefusedFromMemory())
	assert.Positive(t, stores[0].ClaimsRefusedFromMemory())
	assert.Positive(t, stores[1].ClaimsRefusedFromMemory())
}

// The checks of one bucket share one read: each claim of the group gets
// its own answer.
func TestSoldOutMemoryGroupCheck(t *testing.T) {
	db, _ := testenv.MySQL(t)
	s := memoryStore(t, db, false)
	tpl := groupTemplate(t, s, 1, 1)
	_, c := claimCode(s, tpl, "u0", "r0")
	require.Equal(t, "ok", c)
	_, c = claimCode(s, tpl, "u1", "r1")
	require.Equal(t, "sold_out", c)
	rules, err := s.templateRules(context.Background(), tpl)
	require.NoError(t, err)
	calls := func() []*soldOutCall {
		var out []*soldOutCall
		for _, r := range [][2]string{{"u2", "r2"}, {"u0", "r0"}, {"u0", "r0-new"}, {"u3", "r3"}, {"u4", "r0"}} {
			out = append(out, &soldOutCall{member: newMember(context.Background()), memory: s.soldOut, rules: rules,
				req: ClaimRequest{TemplateID: tpl, UserID: r[0], Channel: "app", RequestID: r[1]}})
		}
		return out
	}
	answers := func(group []*soldOutCall) []string {
		out := make([]string, len(group))
		for i, c := range group {
			out[i] = code(c.refusal, false)
		}
		return out
	}
	group := calls()
	s.soldOut.check(context.Background(), group)
	// new users: sold_out; a replay, a user at the limit, a request_id in
	// use: the write path (ok here: no refusal)
	assert.Equal(t, []string{"sold_out", "ok", "ok", "sold_out", "ok"}, answers(group))
	assert.True(t, s.soldOut.has(soldOutKey{tpl, "app"}))

	_, err = db.Exec(`UPDATE channel_quota SET quota = quota + 1 WHERE template_id = ?`, tpl)
	require.NoError(t, err)
	group = calls()
	s.soldOut.check(context.Background(), group)
	assert.Equal(t, []string{"ok", "ok", "ok", "ok", "ok"}, answers(group))
	assert.False(t, s.soldOut.has(soldOutKey{tpl, "app"}), "a bucket with a free slot is still remembered")
}
