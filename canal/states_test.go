package canal

import (
	"fmt"
	"strings"
	"testing"

	gocanal "github.com/go-mysql-org/go-mysql/canal"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
)

// statesYAML is a shop whose coupons are soft-deleted (del 1 or 2) and
// whose orders (evidence order_table) are closed by status 4 or 5 and
// soft-deleted by gone 1.
const statesYAML = `schema: shop
user_coupon: {table: t_uc, id: id, template: tpl, status: st, order: order_sn, user: uid, deleted: {column: del, values: [1, 2]}}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2]}
template: {table: t_tpl, id: id, total_quota: budget}
default_channel: default
redemption_evidence: order_table
orders: {table: t_order, id: id, template: coupon_tpl, user: member, order: sn, status: state, closed: [4, 5], deleted: {column: gone, values: [1]}}
`

var (
	stUC    = table("shop", "t_uc", "id", "tpl", "uid", "st", "order_sn", "del")
	stOrder = table("shop", "t_order", "id", "sn", "member", "coupon_tpl", "state", "gone")
)

func statesDecoder(t *testing.T) *decoder {
	m, err := LoadMapping([]byte(statesYAML))
	require.NoError(t, err)
	return newDecoder(m)
}

// An order moving into a closed code, or soft-deleted, counts as removed;
// back out of it as added; an order inserted closed is not seen, and
// moves between closed codes, or while soft-deleted, change nothing. A
// NULL status is open, a NULL flag not deleted.
func TestDecodeOrderStates(t *testing.T) {
	row := func(id int64, state, gone any) []any {
		return []any{id, fmt.Sprint("sn", id), "u", int64(3), state, gone}
	}
	o := func(id int64, deleted bool) OrderRow {
		return OrderRow{ID: fmt.Sprint(id), Template: 3, User: "u", Order: fmt.Sprint("sn", id), At: testAt, Deleted: deleted}
	}
	upd := func(before, after []any) *gocanal.RowsEvent { return ev(stOrder, gocanal.UpdateAction, before, after) }
	steps := []*gocanal.RowsEvent{
		ev(stOrder, gocanal.InsertAction, row(1, int64(0), int64(0)), row(2, int64(4), int64(0)), row(3, nil, nil), row(4, int64(1), int64(1))),
		upd(row(1, int64(0), int64(0)), row(1, int64(1), int64(0))), // paid: still open
		upd(row(1, int64(1), int64(0)), row(1, int64(4), int64(0))), // closed: removed
		upd(row(1, int64(4), int64(0)), row(1, int64(5), int64(0))), // closed to invalid: nothing
		upd(row(1, int64(5), int64(0)), row(1, int64(1), int64(0))), // reopened: added
		upd(row(3, nil, nil), row(3, nil, int64(1))),                // soft-deleted: removed
		upd(row(3, nil, int64(1)), row(3, int64(4), int64(1))),      // closed while deleted: nothing
		upd(row(2, int64(4), int64(0)), row(2, int64(0), int64(0))), // inserted closed, reopened: added
		ev(stOrder, gocanal.DeleteAction, row(2, int64(0), int64(0)), row(3, int64(4), int64(1))),
	}
	d := statesDecoder(t)
	var b Batch
	for _, e := range steps {
		_, err := d.decode(e, &b)
		require.NoError(t, err)
	}
	require.Equal(t, []OrderRow{o(1, false), o(3, false), o(1, true), o(1, false), o(3, true), o(2, false), o(2, true)}, b.Orders)
}

// A soft-deleted coupon image is no row: an UPDATE into a deleted value is
// a DELETE of the before image, out of one an INSERT of the after image;
// a row inserted, updated or deleted while deleted is not seen.
func TestDecodeSoftDeletedCoupons(t *testing.T) {
	A, U := coupon.Available, coupon.Used
	row := func(st int8, del any) []any { return []any{int64(7), int64(3), "u", st, "o1", del} }
	upd := func(before, after []any) *gocanal.RowsEvent { return ev(stUC, gocanal.UpdateAction, before, after) }
	tr := func(from, to coupon.Status) Transition {
		t := Transition{Coupon: 7, Template: 3, Channel: "default", From: from, To: to, PrevTemplate: 3, PrevChannel: "default",
			Order: "o1", PrevOrder: "o1", User: "u", PrevUser: "u", At: testAt}
		if from != coupon.None {
			t.FromCode = code(map[coupon.Status]int64{A: 0, U: 1}[from])
		}
		if to != coupon.None {
			t.ToCode = code(map[coupon.Status]int64{A: 0, U: 1}[to])
		}
		return t
	}
	cases := []struct {
		name string
		ev   *gocanal.RowsEvent
		want []Transition
	}{
		{"inserted deleted", ev(stUC, gocanal.InsertAction, row(0, int64(1))), nil},
		{"inserted with a NULL flag", ev(stUC, gocanal.InsertAction, row(0, nil)), []Transition{tr(coupon.None, A)}},
		{"soft-deleted", upd(row(1, int64(0)), row(1, int64(2))), []Transition{tr(U, coupon.None)}},
		{"undeleted", upd(row(0, int64(1)), row(0, int64(0))), []Transition{tr(coupon.None, A)}},
		{"changed while deleted", upd(row(0, int64(1)), row(1, int64(2))), nil},
		{"deleted while deleted", ev(stUC, gocanal.DeleteAction, row(1, int64(1))), nil},
		{"deleted", ev(stUC, gocanal.DeleteAction, row(1, int64(0))), []Transition{tr(U, coupon.None)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b Batch
			_, err := statesDecoder(t).decode(c.ev, &b)
			require.NoError(t, err)
			require.Equal(t, c.want, b.Transitions)
		})
	}
}

// The keys of the order states and soft deletes are validated, and the
// checks say what they leave out.
func TestMappingStates(t *testing.T) {
	m, err := LoadMapping([]byte(statesYAML))
	require.NoError(t, err)
	details := map[string]string{}
	for _, c := range m.Checks() {
		details[c.Name] = c.Detail
	}
	require.Contains(t, details["deleted_coupon"], "or soft-deleted (shop.t_uc.del in [1 2])")
	require.Contains(t, details["used_without_redemption"], "open orders only; not closed: shop.t_order.state in [4 5], soft-deleted: shop.t_order.gone in [1]")

	couponOrder := strings.NewReplacer("redemption_evidence: order_table", "redemption_evidence: coupon_order",
		"template: coupon_tpl, user: member, ", "").Replace(statesYAML)
	m, err = LoadMapping([]byte(couponOrder))
	require.NoError(t, err)
	require.False(t, m.specs()[1].source, "with coupon_order the order table is looked up, not followed")
	for _, c := range m.Checks() {
		if c.Name == "used_without_redemption" {
			require.Contains(t, c.Detail, "or with the order it kept when given back, unless that order is open in shop.t_order")
		}
	}

	for _, c := range []struct{ name, from, to, want string }{
		{"status without closed", ", closed: [4, 5]", "", "orders.status and orders.closed go together"},
		{"closed without status", "status: state, ", "", "orders.status and orders.closed go together"},
		{"deleted without values", "values: [1, 2]", "values: []", "user_coupon.deleted lists no value"},
		{"deleted without a column", "{column: gone, values: [1]}", "{values: [1]}", "orders.deleted needs a column"},
	} {
		_, err := LoadMapping([]byte(strings.Replace(statesYAML, c.from, c.to, 1)))
		require.ErrorContains(t, err, c.want, c.name)
	}
	noStatus := strings.Replace(couponOrder, "status: state, closed: [4, 5], ", "", 1)
	_, err = LoadMapping([]byte(noStatus))
	require.ErrorContains(t, err, "with redemption_evidence coupon_order, orders says which orders are open")
}
