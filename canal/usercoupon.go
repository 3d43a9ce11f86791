package canal

import (
	"database/sql"
	"time"

	gocanal "github.com/go-mysql-org/go-mysql/canal"

	"github.com/couponlink/couponlink/coupon"
)

// couponImg is one decoded user coupon image: its state, the status code
// as the source stored it, and its template.
type couponImg struct {
	st   coupon.Status
	code sql.NullInt64
	tpl  int64
}

// userCoupon decodes the rows of the user coupon table into Transitions.
func (d *decoder) userCoupon(l *layout, action string, rows [][]any, at time.Time, b *Batch) error {
	if action != gocanal.UpdateAction {
		rec := b
		if action == gocanal.DeleteAction {
			rec = nil // an undecodable row deleted: nothing was counted, nothing to say
		}
		for _, row := range rows {
			img, ok, err := d.couponImage(l, row, rec)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			id, err := intCol(l, row, l.id, "id")
			if err != nil {
				return err
			}
			ch, order, user := d.channel(row, l.channel), strCol(row, l.order), strCol(row, l.user)
			t := Transition{Coupon: id, Template: img.tpl, Channel: ch, PrevTemplate: img.tpl, PrevChannel: ch,
				Order: order, PrevOrder: order, User: user, PrevUser: user, At: at}
			if action == gocanal.InsertAction {
				t.To, t.ToCode = img.st, img.code
			} else {
				t.From, t.FromCode = img.st, img.code
			}
			b.Transitions = append(b.Transitions, t)
		}
		return nil
	}
	for i := 0; i+1 < len(rows); i += 2 {
		before, after := rows[i], rows[i+1]
		// an undecodable image is out of the counted set: the other one
		// enters or leaves it (both out: nothing to count)
		from, okB, err := d.couponImage(l, before, nil)
		if err != nil {
			return err
		}
		to, okA, err := d.couponImage(l, after, b)
		if err != nil {
			return err
		}
		if !okB && !okA {
			continue
		}
		chB, chA := d.channel(before, l.channel), d.channel(after, l.channel)
		orderB, orderA := strCol(before, l.order), strCol(after, l.order)
		userB, userA := strCol(before, l.user), strCol(after, l.user)
		if okB && okA && from.st == to.st && from.tpl == to.tpl && chB == chA &&
			(!d.watchUsed || from.st != coupon.Used || (orderB == orderA && userB == userA)) &&
			(!d.watchUsers || userB == userA) {
			continue
		}
		id, err := intCol(l, after, l.id, "id")
		if err != nil {
			return err
		}
		order := orderA
		if order == "" && to.st != coupon.Used {
			order = orderB // a refund that clears it; a move into USED carries its own
		}
		t := Transition{Coupon: id, Template: to.tpl, Channel: chA, From: from.st, To: to.st, FromCode: from.code, ToCode: to.code,
			PrevTemplate: from.tpl, PrevChannel: chB, Order: order, PrevOrder: orderB, User: userA, PrevUser: userB, At: at,
			Undecodable: !okB || !okA}
		if !okB {
			t.PrevTemplate, t.PrevChannel = to.tpl, chA
		} else if !okA {
			t.Template, t.Channel = from.tpl, chB
		}
		b.Transitions = append(b.Transitions, t)
	}
	return nil
}

// couponImage decodes a user coupon image's status and template. ok false:
// the mapping cannot decode it; it is recorded in b unless b is nil. The
// stored code is kept either way (invalid for NULL).
func (d *decoder) couponImage(l *layout, row []any, b *Batch) (img couponImg, ok bool, err error) {
	st, bad, err := d.status(l, row, l.status, l.statusCol)
	if err != nil {
		return img, false, err
	}
	if code, null, _ := asInt(row[l.status]); !null { // status parsed it already
		img.code = sql.NullInt64{Int64: code, Valid: true}
	}
	if bad != "" {
		d.undecodable(l, row, l.statusCol, bad, b)
		return img, false, nil
	}
	img.st = st
	if img.tpl, ok, err = requiredInt(l, row, l.template, "template"); err != nil {
		return couponImg{}, false, err
	}
	if !ok {
		d.undecodable(l, row, d.m.UserCoupon.Template, "NULL", b)
		return couponImg{code: img.code}, false, nil // counted nowhere: no state
	}
	return img, true, nil
}
