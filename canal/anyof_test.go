package canal

import (
	"fmt"
	"strings"
	"testing"

	gocanal "github.com/go-mysql-org/go-mysql/canal"
	"github.com/stretchr/testify/require"
)

// anyOfYAML is a PHP shop whose states take several columns: a coupon is
// deleted by is_del 1 or del_flag 9; an order is closed by state 4, by
// is_del 1 or by refund_status 2; a campaign is off the shelf by status 0
// or -1 or by is_del 1.
const anyOfYAML = `schema: shop
user_coupon: {table: t_uc, id: id, template: tpl, status: st, order: order_sn, user: uid,
              deleted: [{column: is_del, values: [1]}, {column: del_flag, values: [9]}]}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2]}
template: {table: t_tpl, id: id, total_quota: budget, status: [{column: status, off_shelf: [0, -1]}], deleted: {column: is_del, values: [1]}}
default_channel: default
redemption_evidence: order_table
orders: {table: t_order, id: id, template: coupon_tpl, user: member, order: sn, status: state,
         closed: [4, {column: is_del, values: [1]}, {column: refund_status, values: [2]}]}
`

var (
	aoUC    = table("shop", "t_uc", "id", "tpl", "uid", "st", "order_sn", "is_del", "del_flag")
	aoOrder = table("shop", "t_order", "id", "sn", "member", "coupon_tpl", "state", "is_del", "refund_status")
	aoTpl   = table("shop", "t_tpl", "id", "budget", "status", "is_del")
)

// Both shapes read: one {column, values}, a list of them; orders.closed
// mixes codes of orders.status with conditions on other columns.
func TestAnyOfYAML(t *testing.T) {
	m, err := LoadMapping([]byte(anyOfYAML))
	require.NoError(t, err)
	require.Equal(t, AnyOf{{"is_del", []int64{1}}, {"del_flag", []int64{9}}}, m.UserCoupon.Deleted)
	require.Equal(t, AnyOf{{"state", []int64{4}}, {"is_del", []int64{1}}, {"refund_status", []int64{2}}}, m.Orders.ClosedWhen())
	require.Nil(t, m.Orders.Deleted)
	require.Equal(t, AnyOf{{"status", []int64{0, -1}}, {"is_del", []int64{1}}}, m.Template.OffShelfWhen())
	require.Equal(t, []string{"status", "is_del"}, m.Template.OffShelfWhen().Columns())

	m, err = LoadMapping([]byte(statesYAML)) // today's one-column shapes
	require.NoError(t, err)
	require.Equal(t, AnyOf{{"del", []int64{1, 2}}}, m.UserCoupon.Deleted)
	require.Equal(t, AnyOf{{"state", []int64{4, 5}}, {"gone", []int64{1}}}, append(m.Orders.ClosedWhen(), m.Orders.Deleted...))

	details := map[string]string{}
	m, err = LoadMapping([]byte(anyOfYAML))
	require.NoError(t, err)
	for _, c := range m.Checks() {
		details[c.Name] = c.Detail
	}
	require.Contains(t, details["deleted_coupon"], "or soft-deleted (shop.t_uc.is_del in [1] or shop.t_uc.del_flag in [9])")
	require.Contains(t, details["used_without_redemption"],
		"not closed: shop.t_order.state in [4] or shop.t_order.is_del in [1] or shop.t_order.refund_status in [2])")
	require.Contains(t, details["claimed_off_shelf"], "shop.t_tpl.status in [0 -1] or soft-deleted (shop.t_tpl.is_del in [1])")
}

// Validate names each condition by its place: template.deleted[1],
// orders.closed[2].
func TestAnyOfValidate(t *testing.T) {
	for _, c := range []struct{ name, from, to, want string }{
		{"a deleted without a column", "{column: del_flag, values: [9]}", "{values: [9]}", "user_coupon.deleted[1] needs a column"},
		{"a deleted without values", "{column: is_del, values: [1]}, {column: del_flag", "{column: is_del, values: []}, {column: del_flag",
			"user_coupon.deleted[0] lists no value"},
		{"a closed condition without values", "{column: refund_status, values: [2]}", "{column: refund_status}", "orders.closed[2] lists no value"},
		{"a closed condition without a column", "{column: refund_status, values: [2]}", "{column: '', values: [2]}", "orders.closed[2] needs a column"},
		{"an off-shelf without codes", "{column: status, off_shelf: [0, -1]}]", "{column: status, off_shelf: [0]}, {column: st}]",
			"template.status[1] lists no off_shelf code"},
		{"a template deleted without a column", "deleted: {column: is_del, values: [1]}}", "deleted: [{column: is_del, values: [1]}, {values: [2]}]}",
			"template.deleted[1] needs a column"},
		{"status codes without status", "status: state,\n", "\n", "orders.status and orders.closed go together"},
	} {
		_, err := LoadMapping([]byte(strings.Replace(anyOfYAML, c.from, c.to, 1)))
		require.ErrorContains(t, err, c.want, c.name)
	}

	// closed by other columns alone: no status column needed, also with
	// coupon_order
	couponOrder := strings.NewReplacer("redemption_evidence: order_table", "redemption_evidence: coupon_order",
		"template: coupon_tpl, user: member, ", "", "status: state,\n", "\n", "closed: [4, ", "closed: [").Replace(anyOfYAML)
	m, err := LoadMapping([]byte(couponOrder))
	require.NoError(t, err)
	require.Equal(t, AnyOf{{"is_del", []int64{1}}, {"refund_status", []int64{2}}}, m.Orders.ClosedWhen())
	var keys []string
	for _, c := range m.specs()[1].cols {
		keys = append(keys, c.key+"="+c.column)
	}
	require.Equal(t, []string{"id=id", "order=sn", "status=", "closed[0]=is_del", "closed[1]=refund_status"}, keys,
		"mapping check finds each column by its role, and wants an integer")
}

// The decode reads every column of a state: a row matching any condition
// is in it, a NULL matches none; a column missing from the table is an
// error naming its role.
func TestAnyOfDecode(t *testing.T) {
	m, err := LoadMapping([]byte(anyOfYAML))
	require.NoError(t, err)
	decode := func(e *gocanal.RowsEvent) Batch {
		var b Batch
		_, err := newDecoder(m).decode(e, &b)
		require.NoError(t, err)
		return b
	}
	order := func(id int64, state, isDel, refund any) []any {
		return []any{id, fmt.Sprint("sn", id), "u", int64(3), state, isDel, refund}
	}
	b := decode(ev(aoOrder, gocanal.InsertAction, order(1, int64(1), int64(0), int64(0)), order(2, int64(4), nil, nil),
		order(3, int64(1), int64(1), nil), order(4, int64(1), nil, int64(2)), order(5, nil, nil, nil), order(6, int64(1), int64(0), int64(1))))
	var open []string
	for _, o := range b.Orders {
		open = append(open, o.ID)
	}
	require.Equal(t, []string{"1", "5", "6"}, open, "2 closed by state, 3 by is_del, 4 by refund_status")
	b = decode(ev(aoOrder, gocanal.UpdateAction, order(1, int64(1), int64(0), int64(0)), order(1, int64(1), int64(0), int64(2))))
	require.Len(t, b.Orders, 1)
	require.True(t, b.Orders[0].Deleted, "refunded: the order counts as removed")

	uc := func(isDel, flag any) []any { return []any{int64(7), int64(3), "u", int8(0), "o1", isDel, flag} }
	require.Empty(t, decode(ev(aoUC, gocanal.InsertAction, uc(int64(0), int64(9)))).Transitions, "deleted by del_flag")
	require.Empty(t, decode(ev(aoUC, gocanal.InsertAction, uc(int64(1), nil))).Transitions, "deleted by is_del")
	require.Len(t, decode(ev(aoUC, gocanal.InsertAction, uc(nil, int64(1)))).Transitions, 1, "neither")

	tpl := func(status, isDel any) []any { return []any{int64(9), int64(5), status, isDel} }
	b = decode(ev(aoTpl, gocanal.InsertAction, tpl(int64(1), int64(0)), tpl(int64(-1), int64(0)), tpl(int64(1), int64(1)), tpl(nil, nil)))
	var off []bool
	for _, tc := range b.Templates {
		off = append(off, tc.OffShelf)
	}
	require.Equal(t, []bool{false, true, true, false}, off)

	var bb Batch
	_, err = newDecoder(m).decode(ev(table("shop", "t_uc", "id", "tpl", "uid", "st", "order_sn", "is_del"), gocanal.InsertAction,
		[]any{int64(7), int64(3), "u", int8(0), "o1", int64(0)}), &bb)
	require.ErrorContains(t, err, `user_coupon.deleted[1] names column "del_flag"`)
}

// The truth queries' SQL of a state and of its negation.
func TestAnyOfSQL(t *testing.T) {
	q := func(c string) string { return "`" + c + "`" }
	a := AnyOf{{"is_del", []int64{1}}, {"refund_status", []int64{2, 3}}}
	require.Equal(t, "(`is_del` IN (1) OR `refund_status` IN (2, 3))", a.SQL(q))
	require.Equal(t, "(`is_del` IS NULL OR `is_del` NOT IN (1)) AND (`refund_status` IS NULL OR `refund_status` NOT IN (2, 3))", a.NotSQL(q))
	require.Empty(t, AnyOf(nil).SQL(q))
	require.Empty(t, AnyOf(nil).NotSQL(q))
	ok, err := a.Matches([]any{nil, int64(3)})
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = a.Matches([]any{nil, nil})
	require.NoError(t, err)
	require.False(t, ok, "a NULL matches no condition")
	_, err = a.Matches([]any{"x", nil})
	require.ErrorContains(t, err, "is_del")
}
