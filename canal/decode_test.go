package canal

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	gocanal "github.com/go-mysql-org/go-mysql/canal"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/go-mysql-org/go-mysql/schema"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
)

const testTS = 1_700_000_000

var testAt = time.Unix(testTS, 0)

func table(sch, name string, cols ...string) *schema.Table {
	t := &schema.Table{Schema: sch, Name: name}
	for _, c := range cols {
		t.Columns = append(t.Columns, schema.TableColumn{Name: c})
	}
	return t
}

// The reference tables, columns in migration order.
var (
	ucTable = table("db", "user_coupon", "id", "template_id", "user_id", "channel", "status", "claimed_at",
		"redeemed_at", "expires_at", "order_id", "request_id", "version", "updated_at")
	rlTable = table("db", "redemption_log", "id", "user_coupon_id", "template_id", "channel", "order_id",
		"redeemed_at", "idempotency_key")
	cqTable = table("db", "channel_quota", "template_id", "channel", "quota", "claimed", "version", "updated_at")
	ifTable = table("db", "inventory_flow", "id", "user_coupon_id", "kind", "seq", "template_id", "channel",
		"from_status", "to_status", "mode", "order_id", "reason", "operator", "request_id", "created_at")
)

// uc is a user_coupon row of the reference schema.
func uc(id int64, tpl any, ch any, status any, order any) []any {
	return []any{uint64(id), tpl, "u1", ch, status, testAt, nil, testAt, order, nil, int64(1), testAt}
}

func ev(t *schema.Table, action string, rows ...[]any) *gocanal.RowsEvent {
	return &gocanal.RowsEvent{Table: t, Action: action, Rows: rows, Header: &replication.EventHeader{Timestamp: testTS}}
}

func refDecoder() *decoder {
	m := DefaultMapping()
	m.Schema = "db"
	return newDecoder(m)
}

// code is a status code as the source stored it.
func code(c int64) sql.NullInt64 { return sql.NullInt64{Int64: c, Valid: true} }

// refCode is a state's code in the reference schema (its number); none
// for None.
func refCode(s coupon.Status) sql.NullInt64 {
	if s == coupon.None {
		return sql.NullInt64{}
	}
	return code(int64(s))
}

type decimalLike string

func (d decimalLike) String() string { return string(d) }

func TestDecodeUserCoupon(t *testing.T) {
	const (
		N = coupon.None
		A = coupon.Available
		U = coupon.Used
		E = coupon.Expired
		R = coupon.Returned
	)
	tr := func(id, tpl int64, ch string, from, to coupon.Status, order string) Transition {
		return Transition{Coupon: id, Template: tpl, Channel: ch, From: from, To: to, FromCode: refCode(from), ToCode: refCode(to),
			PrevTemplate: tpl, PrevChannel: ch, Order: order, PrevOrder: order, User: "u1", PrevUser: "u1", At: testAt}
	}
	// prevOrder is t with the before image's order
	prevOrder := func(t Transition, order string) Transition { t.PrevOrder = order; return t }
	upd := func(from, to any) *gocanal.RowsEvent {
		return ev(ucTable, gocanal.UpdateAction, uc(7, int64(3), "app", from, "o1"), uc(7, int64(3), "app", to, "o1"))
	}
	cases := []struct {
		name string
		ev   *gocanal.RowsEvent
		want []Transition
		rows int
	}{
		{"insert is a claim", ev(ucTable, gocanal.InsertAction, uc(7, int64(3), "app", int8(1), nil)),
			[]Transition{tr(7, 3, "app", N, A, "")}, 1},
		{"multi-row insert", ev(ucTable, gocanal.InsertAction, uc(7, int64(3), "app", int8(1), nil), uc(8, int64(3), "web", int8(1), nil)),
			[]Transition{tr(7, 3, "app", N, A, ""), tr(8, 3, "web", N, A, "")}, 2},
		{"redeem", upd(int8(1), int8(2)), []Transition{tr(7, 3, "app", A, U, "o1")}, 1},
		{"refund restore", upd(int8(2), int8(1)), []Transition{tr(7, 3, "app", U, A, "o1")}, 1},
		{"expire", upd(int8(1), int8(3)), []Transition{tr(7, 3, "app", A, E, "o1")}, 1},
		{"void", upd(int8(1), int8(4)), []Transition{tr(7, 3, "app", A, R, "o1")}, 1},
		{"refund recycle", upd(int8(2), int8(4)), []Transition{tr(7, 3, "app", U, R, "o1")}, 1},
		{"illegal expired to available decodes", upd(int8(3), int8(1)), []Transition{tr(7, 3, "app", E, A, "o1")}, 1},
		{"illegal returned to used decodes", upd(int8(4), int8(2)), []Transition{tr(7, 3, "app", R, U, "o1")}, 1},
		{"illegal used to expired decodes", upd(int8(2), int8(3)), []Transition{tr(7, 3, "app", U, E, "o1")}, 1},
		{"delete", ev(ucTable, gocanal.DeleteAction, uc(7, int64(3), "app", int8(2), "o1")),
			[]Transition{tr(7, 3, "app", U, N, "o1")}, 1},
		{"update without status or key change", upd(int8(1), int8(1)), nil, 1},
		{"template move", ev(ucTable, gocanal.UpdateAction, uc(7, int64(3), "app", int8(1), nil), uc(7, int64(4), "app", int8(1), nil)),
			[]Transition{{Coupon: 7, Template: 4, Channel: "app", From: A, To: A, FromCode: code(1), ToCode: code(1), PrevTemplate: 3, PrevChannel: "app", User: "u1", PrevUser: "u1", At: testAt}}, 1},
		{"channel move with status change", ev(ucTable, gocanal.UpdateAction, uc(7, int64(3), "app", int8(1), nil), uc(7, int64(3), "web", int8(2), "o2")),
			[]Transition{{Coupon: 7, Template: 3, Channel: "web", From: A, To: U, FromCode: code(1), ToCode: code(2), PrevTemplate: 3, PrevChannel: "app", Order: "o2", User: "u1", PrevUser: "u1", At: testAt}}, 1},
		{"order cleared by a refund keeps the before order", ev(ucTable, gocanal.UpdateAction, uc(7, int64(3), "app", int8(2), "o9"), uc(7, int64(3), "app", int8(1), nil)),
			[]Transition{tr(7, 3, "app", U, A, "o9")}, 1},
		{"two updates in one event, one silent", ev(ucTable, gocanal.UpdateAction,
			uc(7, int64(3), "app", int8(1), nil), uc(7, int64(3), "app", int8(1), nil),
			uc(8, int64(3), "app", int8(1), nil), uc(8, int64(3), "app", int8(2), "o8")),
			[]Transition{prevOrder(tr(8, 3, "app", A, U, "o8"), "")}, 2},
		// value types (docs/binlog.md #5)
		{"int16 status, uint64 template", ev(ucTable, gocanal.InsertAction, uc(7, uint64(3), "app", int16(1), nil)), []Transition{tr(7, 3, "app", N, A, "")}, 1},
		{"int32 status, int32 template", ev(ucTable, gocanal.InsertAction, uc(7, int32(3), "app", int32(1), nil)), []Transition{tr(7, 3, "app", N, A, "")}, 1},
		{"int64 status", ev(ucTable, gocanal.InsertAction, uc(7, int64(3), "app", int64(1), nil)), []Transition{tr(7, 3, "app", N, A, "")}, 1},
		{"uint8 status", ev(ucTable, gocanal.InsertAction, uc(7, int64(3), "app", uint8(1), nil)), []Transition{tr(7, 3, "app", N, A, "")}, 1},
		{"dump strings", ev(ucTable, gocanal.InsertAction, uc(7, "3", "app", "1", "42")), []Transition{tr(7, 3, "app", N, A, "42")}, 1},
		{"bytes", ev(ucTable, gocanal.InsertAction, uc(7, []byte("3"), []byte("app"), []byte("1"), []byte("o1"))), []Transition{tr(7, 3, "app", N, A, "o1")}, 1},
		{"decimal and float", ev(ucTable, gocanal.InsertAction, uc(7, decimalLike("3"), "app", float64(1), int64(42))), []Transition{tr(7, 3, "app", N, A, "42")}, 1},
		{"NULL channel is the default channel", ev(ucTable, gocanal.InsertAction, uc(7, int64(3), nil, int8(1), nil)), []Transition{tr(7, 3, "", N, A, "")}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b Batch
			n, err := refDecoder().decode(c.ev, &b)
			require.NoError(t, err)
			require.Equal(t, c.rows, n)
			require.Equal(t, c.rows, b.Rows)
			require.Equal(t, c.want, b.Transitions)
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		name, want string
		ev         *gocanal.RowsEvent
	}{
		{"status not a number", `db.user_coupon.status: want an integer, got "x"`, ev(ucTable, gocanal.InsertAction, uc(7, int64(3), "app", "x", nil))},
		{"template is a time", "db.user_coupon (template column): want an integer, got the time", ev(ucTable, gocanal.InsertAction, uc(7, testAt, "app", int8(1), nil))},
		{"row shorter than the table", "a row event has 2 columns but the table has 12 now", ev(ucTable, gocanal.InsertAction, []any{int64(1), int64(2)})},
		{"odd update rows", "not before/after pairs", ev(ucTable, gocanal.UpdateAction, uc(7, int64(3), "app", int8(1), nil))},
		{"unsubscribed table", "which the mapping does not subscribe", ev(table("db", "other", "id"), gocanal.InsertAction, []any{int64(1)})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b Batch
			_, err := refDecoder().decode(c.ev, &b)
			require.ErrorContains(t, err, c.want)
		})
	}
	var b Batch
	_, err := refDecoder().decode(ev(ucTable, gocanal.InsertAction, []any{int64(1)}), &b)
	require.ErrorIs(t, err, ErrSchemaChanged)
}

// TestDecodeUndecodable: a row the mapping cannot decode is recorded, not
// an error; an UPDATE into (out of) it leaves (enters) the counted set.
func TestDecodeUndecodable(t *testing.T) {
	A := coupon.Available
	cases := []struct {
		name string
		ev   *gocanal.RowsEvent
		want []Transition
		bad  []Undecodable
	}{
		{"unmapped status code", ev(ucTable, gocanal.InsertAction, uc(7, int64(3), "app", int8(7), nil)), nil,
			[]Undecodable{{Table: "db.user_coupon", Key: "7", Column: "status", Value: "7"}}},
		{"NULL status", ev(ucTable, gocanal.InsertAction, uc(7, int64(3), "app", nil, nil)), nil,
			[]Undecodable{{Table: "db.user_coupon", Key: "7", Column: "status", Value: "NULL"}}},
		{"NULL template", ev(ucTable, gocanal.InsertAction, uc(7, nil, "app", int8(1), nil)), nil,
			[]Undecodable{{Table: "db.user_coupon", Key: "7", Column: "template_id", Value: "NULL"}}},
		{"an undecodable row among valid ones", ev(ucTable, gocanal.InsertAction, uc(7, int64(3), "app", nil, nil), uc(8, int64(3), "app", int8(1), nil)),
			[]Transition{{Coupon: 8, Template: 3, Channel: "app", To: A, ToCode: code(1), PrevTemplate: 3, PrevChannel: "app", User: "u1", PrevUser: "u1", At: testAt}}, []Undecodable{{Table: "db.user_coupon", Key: "7", Column: "status", Value: "NULL"}}},
		{"deleted undecodable row", ev(ucTable, gocanal.DeleteAction, uc(7, int64(3), "app", nil, nil)), nil, nil},
		{"update into NULL leaves", ev(ucTable, gocanal.UpdateAction, uc(7, int64(3), "app", int8(1), nil), uc(7, int64(3), "app", nil, nil)),
			[]Transition{{Coupon: 7, Template: 3, Channel: "app", From: A, FromCode: code(1), PrevTemplate: 3, PrevChannel: "app", User: "u1", PrevUser: "u1", At: testAt, Undecodable: true}},
			[]Undecodable{{Table: "db.user_coupon", Key: "7", Column: "status", Value: "NULL"}}},
		{"update out of NULL enters", ev(ucTable, gocanal.UpdateAction, uc(7, int64(3), "app", nil, nil), uc(7, int64(3), "app", int8(1), nil)),
			[]Transition{{Coupon: 7, Template: 3, Channel: "app", To: A, ToCode: code(1), PrevTemplate: 3, PrevChannel: "app", User: "u1", PrevUser: "u1", At: testAt, Undecodable: true}}, nil},
		{"update out of an unmapped code keeps it", ev(ucTable, gocanal.UpdateAction, uc(7, int64(3), "app", int8(7), nil), uc(7, int64(3), "app", int8(1), nil)),
			[]Transition{{Coupon: 7, Template: 3, Channel: "app", To: A, FromCode: code(7), ToCode: code(1), PrevTemplate: 3, PrevChannel: "app", User: "u1", PrevUser: "u1", At: testAt, Undecodable: true}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b Batch
			n, err := refDecoder().decode(c.ev, &b)
			require.NoError(t, err)
			require.Equal(t, len(c.ev.Rows)/map[bool]int{true: 2, false: 1}[c.ev.Action == gocanal.UpdateAction], n)
			require.Equal(t, c.want, b.Transitions)
			require.Equal(t, c.bad, b.Undecodable)
		})
	}
}

func TestDecodeLegacyMapping(t *testing.T) {
	m, err := LoadMapping([]byte(legacyYAML))
	require.NoError(t, err)
	d := newDecoder(m)
	uct := table("legacydb", "t_user_coupon", "id", "uid", "tpl_id", "state", "order_no", "expire_time")
	row := func(state any, order any) []any { return []any{int64(5), "u", int32(9), state, order, testAt} }
	var b Batch
	_, err = d.decode(ev(uct, gocanal.InsertAction, row(int8(0), nil)), &b)
	require.NoError(t, err)
	for _, code := range []int8{3, 9} { // two codes for RETURNED
		_, err = d.decode(ev(uct, gocanal.UpdateAction, row(int8(1), "o1"), row(code, "o1")), &b)
		require.NoError(t, err)
	}
	_, err = d.decode(ev(uct, gocanal.UpdateAction, row(int8(3), "o1"), row(int8(9), "o1")), &b) // same state, no transition
	require.NoError(t, err)
	require.Equal(t, []Transition{
		{Coupon: 5, Template: 9, Channel: "legacy", To: coupon.Available, ToCode: code(0), PrevTemplate: 9, PrevChannel: "legacy", User: "u", PrevUser: "u", At: testAt},
		{Coupon: 5, Template: 9, Channel: "legacy", From: coupon.Used, To: coupon.Returned, FromCode: code(1), ToCode: code(3), PrevTemplate: 9, PrevChannel: "legacy",
			Order: "o1", PrevOrder: "o1", User: "u", PrevUser: "u", At: testAt},
		{Coupon: 5, Template: 9, Channel: "legacy", From: coupon.Used, To: coupon.Returned, FromCode: code(1), ToCode: code(9), PrevTemplate: 9, PrevChannel: "legacy",
			Order: "o1", PrevOrder: "o1", User: "u", PrevUser: "u", At: testAt},
	}, withoutExpiry(b.Transitions))
	require.Equal(t, 4, b.Rows)

	b = Batch{}
	_, err = d.decode(ev(uct, gocanal.InsertAction, row(int8(7), nil)), &b)
	require.NoError(t, err)
	require.Empty(t, b.Transitions)
	require.Equal(t, []Undecodable{{Table: "legacydb.t_user_coupon", Key: "5", Column: "state", Value: "7"}}, b.Undecodable)

	wo := table("legacydb", "t_writeoff", "id", "coupon_id", "order_no", "created")
	b = Batch{}
	_, err = d.decode(ev(wo, gocanal.InsertAction, []any{int64(1), int64(5), "o1", testAt}), &b)
	require.NoError(t, err)
	require.Equal(t, []Redemption{{ID: 1, Coupon: 5, Channel: "legacy", Order: "o1", At: testAt}}, b.Redemptions)
}

func TestDecodeRedemptionQuotaFlow(t *testing.T) {
	d := refDecoder()
	var b Batch
	rl := func(id int64, order any) []any {
		return []any{uint64(id), uint64(7), uint64(3), "app", order, testAt, "k"}
	}
	cq := func(tpl int64, ch string, quota, claimed int64) []any {
		return []any{uint64(tpl), ch, quota, claimed, int64(1), testAt}
	}
	steps := []*gocanal.RowsEvent{
		ev(rlTable, gocanal.InsertAction, rl(1, "o1")),
		ev(rlTable, gocanal.UpdateAction, rl(1, "o1"), rl(1, "o2")), // ignored
		ev(rlTable, gocanal.DeleteAction, rl(1, "o1")),
		ev(cqTable, gocanal.InsertAction, cq(3, "app", 10, 0)),
		ev(cqTable, gocanal.UpdateAction, cq(3, "app", 10, 0), cq(3, "app", 10, 1)),
		ev(cqTable, gocanal.UpdateAction, cq(3, "app", 10, 1), cq(3, "app", 10, 1)), // version only
		ev(cqTable, gocanal.UpdateAction, cq(3, "app", 10, 1), cq(3, "app", 1, 1)),  // the last slot goes: sold out
		ev(cqTable, gocanal.UpdateAction, cq(3, "app", 1, 1), cq(3, "app", 10, 1)),  // quota back: not a sell-out
		ev(cqTable, gocanal.UpdateAction, cq(3, "app", 10, 1), cq(3, "web", 10, 1)), // key move
		ev(cqTable, gocanal.DeleteAction, cq(3, "web", 10, 1)),
		ev(ifTable, gocanal.InsertAction, []any{uint64(1), uint64(7), "refund", uint64(1), uint64(3), "app", int8(2), int8(4), nil, "o1", nil, nil, nil, testAt}),
		ev(ifTable, gocanal.InsertAction, []any{uint64(2), uint64(7), "correction", uint64(0), uint64(3), "app", int8(0), int8(1), nil, nil, nil, nil, nil, testAt}),
		ev(ifTable, gocanal.DeleteAction, []any{uint64(2), uint64(7), "correction", uint64(0), uint64(3), "app", int8(0), int8(1), nil, nil, nil, nil, nil, testAt}), // ignored
	}
	for _, e := range steps {
		_, err := d.decode(e, &b)
		require.NoError(t, err)
	}
	require.Equal(t, []Redemption{
		{ID: 1, Coupon: 7, Template: 3, Channel: "app", Order: "o1", At: testAt},
		{ID: 1, Coupon: 7, Template: 3, Channel: "app", Order: "o1", At: testAt, Deleted: true},
	}, b.Redemptions)
	require.Equal(t, []QuotaChange{
		{Template: 3, Channel: "app", Quota: 10, Inserted: true},
		{Template: 3, Channel: "app", Quota: 10, Claimed: 1, Updated: true, PrevQuota: 10},
		{Template: 3, Channel: "app", Quota: 1, Claimed: 1, SoldOut: true, Updated: true, PrevQuota: 10, PrevClaimed: 1},
		{Template: 3, Channel: "app", Quota: 10, Claimed: 1, Updated: true, PrevQuota: 1, PrevClaimed: 1},
		{Template: 3, Channel: "app", Quota: 10, Claimed: 1, Deleted: true},
		{Template: 3, Channel: "web", Quota: 10, Claimed: 1},
		{Template: 3, Channel: "web", Quota: 10, Claimed: 1, Deleted: true},
	}, b.Quotas)
	require.Equal(t, []Flow{
		{ID: 1, Coupon: 7, Kind: "refund", Seq: 1, Template: 3, Channel: "app", From: coupon.Used, To: coupon.Returned},
		{ID: 2, Coupon: 7, Kind: "correction", Template: 3, Channel: "app", From: coupon.None, To: coupon.Available},
	}, b.Flows)
	require.Equal(t, len(steps), b.Rows)
}

// After a DDL go-mysql hands out a new table definition: the columns are
// located again, and forget drops the old indexes.
func TestDecodeRelocatesColumnsAfterDDL(t *testing.T) {
	d := refDecoder()
	var b Batch
	_, err := d.decode(ev(ucTable, gocanal.InsertAction, uc(1, int64(3), "app", int8(1), nil)), &b)
	require.NoError(t, err)
	d.forget("db", "user_coupon")
	require.Empty(t, d.layouts)
	moved := table("db", "user_coupon", "status", "id", "extra", "template_id", "channel", "order_id", "user_id")
	_, err = d.decode(ev(moved, gocanal.InsertAction, []any{int8(2), int64(2), "x", int64(4), "web", "o2", "u2"}), &b)
	require.NoError(t, err)
	require.Equal(t, Transition{Coupon: 2, Template: 4, Channel: "web", To: coupon.Used, ToCode: code(2), PrevTemplate: 4, PrevChannel: "web", Order: "o2", PrevOrder: "o2", User: "u2", PrevUser: "u2", At: testAt}, b.Transitions[1])

	gone := table("db", "user_coupon", "id", "template_id", "channel", "order_id", "user_id")
	_, err = d.decode(ev(gone, gocanal.InsertAction, []any{int64(2), int64(4), "web", "o2", "u2"}), &b)
	require.ErrorContains(t, err, `user_coupon.status names column "status" but db.user_coupon has no such column now`)
}

func TestAsInt(t *testing.T) {
	for _, v := range []any{int8(5), int16(5), int32(5), int64(5), int(5), uint8(5), uint16(5), uint32(5), uint64(5), uint(5),
		float32(5), float64(5), "5", " 5 ", []byte("5"), "5.0", decimalLike("5")} {
		n, null, err := asInt(v)
		require.NoError(t, err, "%T", v)
		require.False(t, null)
		require.Equal(t, int64(5), n, "%T", v)
	}
	_, null, err := asInt(nil)
	require.NoError(t, err)
	require.True(t, null)
	for _, v := range []any{uint64(1 << 63), 5.5, "x", testAt, struct{}{}} {
		_, _, err := asInt(v)
		require.Error(t, err, "%T %v", v, v)
	}
	require.Equal(t, "x", asString([]byte("x")))
	require.Equal(t, "-3", asString(int32(-3)))
	require.Equal(t, "18446744073709551615", asString(uint64(1<<64-1)))
	require.Equal(t, "", asString(nil))
}

// evidenceDecoder decodes a shop whose coupon row carries its order and
// user (t_uc) and, for order_table, whose order table names the template
// and the user of a use (t_order, template NULL for an order without one).
func evidenceDecoder(t *testing.T, evidence string) *decoder {
	y := `schema: shop
user_coupon: {table: t_uc, id: id, template: tpl, status: st, order: order_sn, user: uid}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2]}
template: {table: t_tpl, id: id, total_quota: budget}
default_channel: default
redemption_evidence: ` + evidence + "\n"
	if evidence == "table" {
		y += "redemption_log: {table: t_writeoff, id: id, coupon: coupon_id, order: order_sn}\n"
	}
	if evidence == "order_table" {
		y += "orders: {table: t_order, id: id, template: coupon_tpl, user: member, order: sn}\n"
	}
	m, err := LoadMapping([]byte(y))
	require.NoError(t, err)
	return newDecoder(m)
}

var (
	evUC    = table("shop", "t_uc", "id", "tpl", "uid", "st", "order_sn")
	evOrder = table("shop", "t_order", "id", "sn", "member", "coupon_tpl", "total")
)

// A coupon that stays USED while its order or user column changes is
// emitted (From = To = USED, no counter moves) when the evidence looks at
// those columns, with the before image's order and user; a move into USED
// carries the after image's order, never the before image's.
func TestDecodeUsedCouponChanges(t *testing.T) {
	U, A := coupon.Used, coupon.Available
	row := func(st int8, order any, user string) []any { return []any{int64(7), int64(3), user, st, order} }
	upd := func(before, after []any) *gocanal.RowsEvent { return ev(evUC, gocanal.UpdateAction, before, after) }
	tr := func(from, to coupon.Status, order, prevOrder, user, prevUser string) Transition {
		shopCode := map[coupon.Status]int64{A: 0, U: 1} // the mapping's codes
		return Transition{Coupon: 7, Template: 3, Channel: "default", From: from, To: to, FromCode: code(shopCode[from]),
			ToCode: code(shopCode[to]), PrevTemplate: 3, PrevChannel: "default", Order: order, PrevOrder: prevOrder, User: user,
			PrevUser: prevUser, At: testAt}
	}
	cases := []struct {
		name     string
		evidence string
		ev       *gocanal.RowsEvent
		want     []Transition
	}{
		{"order changes while USED", "coupon_order", upd(row(1, "o1", "u"), row(1, "o2", "u")), []Transition{tr(U, U, "o2", "o1", "u", "u")}},
		{"order set on a USED coupon", "coupon_order", upd(row(1, nil, "u"), row(1, "o2", "u")), []Transition{tr(U, U, "o2", "", "u", "u")}},
		{"user changes while USED", "order_table", upd(row(1, "o1", "u"), row(1, "o1", "v")), []Transition{tr(U, U, "o1", "o1", "v", "u")}},
		{"nothing the evidence reads changes", "coupon_order", upd(row(1, "o1", "u"), row(1, "o1", "u")), nil},
		{"order changes while AVAILABLE", "coupon_order", upd(row(0, "o1", "u"), row(0, "o2", "u")), nil},
		{"order changes while USED, evidence table", "table", upd(row(1, "o1", "u"), row(1, "o2", "u")), nil},
		{"order changes while USED, evidence none", "none", upd(row(1, "o1", "u"), row(1, "o2", "u")), nil},
		{"into USED without an order keeps none", "coupon_order", upd(row(0, "old", "u"), row(1, nil, "u")), []Transition{tr(A, U, "", "old", "u", "u")}},
		{"a refund that clears the order keeps the before order", "coupon_order", upd(row(1, "o1", "u"), row(0, nil, "u")), []Transition{tr(U, A, "o1", "o1", "u", "u")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b Batch
			n, err := evidenceDecoder(t, c.evidence).decode(c.ev, &b)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.Equal(t, c.want, b.Transitions)
		})
	}
}

// The order table of evidence order_table: inserts and deletes of orders
// that used a coupon; an UPDATE that moves an order to another (template,
// user) is a delete and an insert; other updates, and orders without a
// template (NULL or 0), are not emitted.
func TestDecodeOrderTable(t *testing.T) {
	row := func(id int64, member any, tpl any) []any { return []any{id, fmt.Sprint("sn", id), member, tpl, "9.90"} }
	o := func(id int64, tpl int64, user string, deleted bool) OrderRow {
		return OrderRow{ID: fmt.Sprint(id), Template: tpl, User: user, Order: fmt.Sprint("sn", id), At: testAt, Deleted: deleted}
	}
	steps := []*gocanal.RowsEvent{
		ev(evOrder, gocanal.InsertAction, row(1, "u1", int64(3)), row(2, "u1", nil), row(3, int64(42), uint64(4)), row(4, "u2", int64(0))),
		ev(evOrder, gocanal.UpdateAction, row(1, "u1", int64(3)), []any{int64(1), "sn1", "u1", int64(3), "0.00"}), // the total: ignored
		ev(evOrder, gocanal.UpdateAction, row(1, "u1", int64(3)), row(1, "u1", int64(5))),                         // another template
		ev(evOrder, gocanal.UpdateAction, row(3, int64(42), int64(4)), row(3, int64(43), int64(4))),               // another user
		ev(evOrder, gocanal.UpdateAction, row(2, "u1", nil), row(2, "u1", int64(6))),                              // a template set later
		ev(evOrder, gocanal.UpdateAction, row(1, "u1", int64(5)), row(1, "u1", nil)),                              // cleared: a cancel
		ev(evOrder, gocanal.DeleteAction, row(3, int64(43), int64(4)), row(4, "u2", nil)),
		ev(evOrder, gocanal.InsertAction, row(5, nil, int64(3))), // a NULL user is ""
	}
	d := evidenceDecoder(t, "order_table")
	var b Batch
	rows := 0
	for _, e := range steps {
		n, err := d.decode(e, &b)
		require.NoError(t, err)
		rows += n
	}
	require.Equal(t, []OrderRow{
		o(1, 3, "u1", false), o(3, 4, "42", false),
		o(1, 3, "u1", true), o(1, 5, "u1", false),
		o(3, 4, "42", true), o(3, 4, "43", false),
		o(2, 6, "u1", false),
		o(1, 5, "u1", true),
		o(3, 4, "43", true),
		o(5, 3, "", false),
	}, b.Orders)
	require.Equal(t, rows, b.Rows)
	require.Equal(t, 12, b.Rows, "every row change of the order table counts, emitted or not")
	require.Empty(t, b.Transitions)
	require.Empty(t, b.Undecodable)

	// After places each order among the uses, across the transactions of a batch
	used := func(id int64) *gocanal.RowsEvent {
		return ev(evUC, gocanal.UpdateAction, []any{id, int64(3), "u1", int8(0), nil}, []any{id, int64(3), "u1", int8(1), nil})
	}
	var tx1, tx2, all Batch
	for _, step := range []struct {
		tx *Batch
		ev *gocanal.RowsEvent
	}{{&tx1, used(1)}, {&tx1, ev(evOrder, gocanal.InsertAction, row(6, "u1", int64(3)))},
		{&tx2, used(2)}, {&tx2, used(3)}, {&tx2, ev(evOrder, gocanal.InsertAction, row(7, "u1", int64(3)), row(8, "u1", int64(3)))}, {&tx2, used(4)}} {
		_, err := d.decode(step.ev, step.tx)
		require.NoError(t, err)
	}
	all.appendTx(&tx1)
	all.appendTx(&tx2)
	var after []int
	for _, o := range all.Orders {
		after = append(after, o.After)
	}
	require.Len(t, all.Transitions, 4)
	require.Equal(t, []int{1, 3, 3}, after, "order 6 follows coupon 1; orders 7 and 8 follow coupon 3, before coupon 4")

	// the order table is subscribed only for order_table
	require.Contains(t, evidenceDecoder(t, "order_table").sources, "shop.t_order")
	require.NotContains(t, evidenceDecoder(t, "none").sources, "shop.t_order")
}
