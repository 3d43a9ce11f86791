package canal

import (
	"strings"
	"testing"
	"time"

	gocanal "github.com/go-mysql-org/go-mysql/canal"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
)

// A shop's template table with a per-user limit and an end time (and a
// remaining-stock column the shop moves on each claim), and a user column
// on its coupons.
func limitDecoder(t *testing.T) *decoder {
	t.Helper()
	m, err := LoadMapping([]byte(strings.Replace(legacyYAML, "total_quota: budget}",
		"total_quota: budget, remaining: stock, per_user_limit: per_member, end_time: ends}", 1)))
	require.NoError(t, err)
	require.True(t, m.FollowsTemplates())
	return newDecoder(m)
}

// The template decoder carries the per-user limit and the end time with
// the budget, and emits a row change when any of them (or the id) moved.
func TestDecodeTemplateLimitAndEnd(t *testing.T) {
	d := limitDecoder(t)
	tpl := table("legacydb", "t_coupon_tpl", "id", "title", "budget", "stock", "per_member", "ends")
	end := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	later := end.Add(48 * time.Hour)
	row := func(id int64, budget, stock, limit, ends any) []any {
		return []any{id, "t", budget, stock, limit, ends}
	}
	steps := []*gocanal.RowsEvent{
		ev(tpl, gocanal.InsertAction, row(9, int64(10), int64(10), int32(1), end)),
		ev(tpl, gocanal.UpdateAction, row(9, int64(10), int64(10), int32(1), end), row(9, int64(10), int64(9), int32(1), end)), // stock only
		ev(tpl, gocanal.UpdateAction, row(9, int64(10), int64(9), int32(1), end), row(9, int64(10), int64(9), int32(2), end)),  // limit raised
		ev(tpl, gocanal.UpdateAction, row(9, int64(10), int64(9), int32(2), end), row(9, int64(10), int64(9), int32(2), later)),
		ev(tpl, gocanal.UpdateAction, row(9, int64(10), int64(9), int32(2), later), row(9, int64(10), int64(9), nil, nil)), // both cleared
		ev(tpl, gocanal.UpdateAction, row(9, int64(10), int64(9), nil, nil), row(9, int64(10), int64(9), int32(-1), "0000-00-00 00:00:00")),
		ev(tpl, gocanal.UpdateAction, row(9, int64(10), int64(9), nil, nil), row(9, int64(10), int64(9), int32(3), "2024-05-03 12:00:00")), // a dump's string
		ev(tpl, gocanal.UpdateAction, row(9, int64(10), int64(9), int32(3), later), row(8, int64(10), int64(9), int32(3), later)),          // id change
		ev(tpl, gocanal.DeleteAction, row(8, int64(10), int64(9), int32(3), later)),
	}
	var b Batch
	for _, e := range steps {
		_, err := d.decode(e, &b)
		require.NoError(t, err)
	}
	require.Equal(t, []TemplateChange{
		{Template: 9, Quota: 10, Known: true, Limit: 1, End: end, Inserted: true},
		{Template: 9, Quota: 10, Known: true, Limit: 2, End: end, PrevQuota: 10, PrevKnown: true, PrevLimit: 1, PrevEnd: end},
		{Template: 9, Quota: 10, Known: true, Limit: 2, End: later, PrevQuota: 10, PrevKnown: true, PrevLimit: 2, PrevEnd: end},
		{Template: 9, Quota: 10, Known: true, PrevQuota: 10, PrevKnown: true, PrevLimit: 2, PrevEnd: later},
		{Template: 9, Quota: 10, Known: true, Limit: 3, End: later, PrevQuota: 10, PrevKnown: true},
		{Template: 9, Quota: 10, Known: true, Limit: 3, End: later, Deleted: true, PrevQuota: 10, PrevKnown: true, PrevLimit: 3, PrevEnd: later},
		{Template: 8, Quota: 10, Known: true, Limit: 3, End: later, Inserted: true},
		{Template: 8, Quota: 10, Known: true, Limit: 3, End: later, Deleted: true, PrevQuota: 10, PrevKnown: true, PrevLimit: 3, PrevEnd: later},
	}, b.Templates, "a negative limit and a zero date are none: no change from NULL")
	require.Equal(t, len(steps), b.Rows)

	_, err := d.decode(ev(tpl, gocanal.InsertAction, row(7, int64(1), int64(1), int32(1), int64(1714564800))), &b)
	require.ErrorContains(t, err, "legacydb.t_coupon_tpl (end_time column): want a time, got int64")
}

// A template change's After places it among the batch's transitions, in
// binlog order, across the transactions a batch joins.
func TestDecodeTemplateAfter(t *testing.T) {
	d := limitDecoder(t)
	tpl := table("legacydb", "t_coupon_tpl", "id", "title", "budget", "stock", "per_member", "ends")
	uct := table("legacydb", "t_user_coupon", "id", "uid", "tpl_id", "state", "order_no", "expire_time")
	claim := func(id int64, user string) *gocanal.RowsEvent {
		return ev(uct, gocanal.InsertAction, []any{id, user, int32(9), int8(0), nil, testAt})
	}
	limit := func(from, to int32) *gocanal.RowsEvent {
		return ev(tpl, gocanal.UpdateAction, []any{int64(9), "t", int64(10), int64(5), from, nil}, []any{int64(9), "t", int64(10), int64(5), to, nil})
	}
	var batch Batch
	for _, txn := range [][]*gocanal.RowsEvent{
		{claim(1, "u1"), limit(1, 2), claim(2, "u1")},
		{limit(2, 3)},
		{claim(3, "u1"), claim(4, "u2"), limit(3, 4)},
	} {
		var tx Batch
		for _, e := range txn {
			_, err := d.decode(e, &tx)
			require.NoError(t, err)
		}
		batch.appendTx(&tx)
	}
	var idx []int
	for _, c := range batch.Templates {
		idx = append(idx, c.After)
	}
	require.Equal(t, []int{1, 2, 4}, idx)
	require.Len(t, batch.Transitions, 4)
}

// A coupon given to another user is a transition (the same state, the same
// template), with the user before and after.
func TestDecodeUserMove(t *testing.T) {
	d := limitDecoder(t)
	uct := table("legacydb", "t_user_coupon", "id", "uid", "tpl_id", "state", "order_no", "expire_time")
	row := func(user any, state int8) []any { return []any{int64(5), user, int32(9), state, nil, testAt} }
	var b Batch
	for _, e := range []*gocanal.RowsEvent{
		ev(uct, gocanal.UpdateAction, row("u1", 0), row("u2", 0)),
		ev(uct, gocanal.UpdateAction, row("u2", 0), row("u2", 0)), // nothing mapped changed
		ev(uct, gocanal.UpdateAction, row("u2", 0), row(nil, 7)),  // leaves the counted set
	} {
		_, err := d.decode(e, &b)
		require.NoError(t, err)
	}
	require.Equal(t, []Transition{
		{Coupon: 5, Template: 9, Channel: "legacy", From: coupon.Available, To: coupon.Available, FromCode: code(0), ToCode: code(0),
			PrevTemplate: 9, PrevChannel: "legacy", User: "u2", PrevUser: "u1", At: testAt},
		{Coupon: 5, Template: 9, Channel: "legacy", From: coupon.Available, FromCode: code(0), ToCode: code(7),
			PrevTemplate: 9, PrevChannel: "legacy", PrevUser: "u2", At: testAt, Undecodable: true},
	}, withoutExpiry(b.Transitions))
}
