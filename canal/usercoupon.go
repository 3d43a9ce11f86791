package canal

import (
	"database/sql"
	"fmt"
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
// A soft-deleted image (user_coupon.deleted) is no row: an UPDATE into it
// is decoded as a DELETE of the before image, out of it as an INSERT of
// the after image.
func (d *decoder) userCoupon(l *layout, action string, rows [][]any, at time.Time, b *Batch) error {
	del := d.m.UserCoupon.Deleted
	if action != gocanal.UpdateAction {
		for _, row := range rows {
			if gone(del, row, l.gone) {
				continue
			}
			if err := d.couponRow(l, row, action == gocanal.InsertAction, at, b); err != nil {
				return err
			}
		}
		return nil
	}
	for i := 0; i+1 < len(rows); i += 2 {
		before, after := rows[i], rows[i+1]
		if goneB, goneA := gone(del, before, l.gone), gone(del, after, l.gone); goneB || goneA {
			var err error
			switch {
			case goneB && !goneA:
				err = d.couponRow(l, after, true, at, b)
			case goneA && !goneB:
				err = d.couponRow(l, before, false, at, b)
			}
			if err != nil {
				return err
			}
			continue
		}
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
		if t.Expires, err = d.expires(l, after); err != nil {
			return err
		}
		if !okB {
			t.PrevTemplate, t.PrevChannel = to.tpl, chA
		} else if !okA {
			t.Template, t.Channel = from.tpl, chB
		}
		b.Transitions = append(b.Transitions, t)
	}
	return nil
}

// couponRow decodes an inserted (or deleted) coupon row into a
// Transition from (to) no state.
func (d *decoder) couponRow(l *layout, row []any, inserted bool, at time.Time, b *Batch) error {
	rec := b
	if !inserted {
		rec = nil // an undecodable row deleted: nothing was counted, nothing to say
	}
	img, ok, err := d.couponImage(l, row, rec)
	if err != nil || !ok {
		return err
	}
	id, err := intCol(l, row, l.id, "id")
	if err != nil {
		return err
	}
	ch, order, user := d.channel(row, l.channel), strCol(row, l.order), strCol(row, l.user)
	t := Transition{Coupon: id, Template: img.tpl, Channel: ch, PrevTemplate: img.tpl, PrevChannel: ch,
		Order: order, PrevOrder: order, User: user, PrevUser: user, At: at}
	if t.Expires, err = d.expires(l, row); err != nil {
		return err
	}
	if inserted {
		t.To, t.ToCode = img.st, img.code
	} else {
		t.From, t.FromCode = img.st, img.code
	}
	b.Transitions = append(b.Transitions, t)
	return nil
}

// expires reads a coupon image's own expiry (zero when unmapped or NULL).
func (d *decoder) expires(l *layout, row []any) (time.Time, error) {
	if l.expires < 0 {
		return time.Time{}, nil
	}
	t, err := d.timeCol(row[l.expires], l.expiresWall, d.m.UserCoupon.ExpiresAt)
	if err != nil {
		return t, fmt.Errorf("decode %s (expires_at column): %w", l.name, err)
	}
	return t, nil
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
