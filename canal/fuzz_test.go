package canal

import (
	"strings"
	"testing"
	"time"

	gocanal "github.com/go-mysql-org/go-mysql/canal"
	"github.com/go-mysql-org/go-mysql/schema"

	"github.com/couponlink/couponlink/coupon"
)

// FuzzLoadMapping: any document is either refused with an error or gives
// a mapping that validates again and whose tables, sources and states can
// be listed; never a panic.
func FuzzLoadMapping(f *testing.F) {
	f.Add(legacyYAML)
	f.Add(sourcesYAML)
	f.Add(legacyYAML + "channel_quota: {table: t_quota, template: tpl_id, channel: ch, quota: quota, claimed: claimed}\n")
	f.Add(strings.Replace(legacyYAML, "t_user_coupon", `"s_{0..1}.uc_{00..63}"`, 1))
	f.Add("user_coupon: {table: \"a_{9..1}\"}\n")
	f.Add("status: {USED: [1, 1]}\n")
	f.Add("sources: [{name: a}]\n")
	f.Add("redemption_evidence: order_table\norders: {table: o, id: id}\n")
	f.Fuzz(func(t *testing.T, doc string) {
		m, err := LoadMapping([]byte(doc))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("a loaded mapping does not validate again: %v", err)
		}
		_ = m.SourceTables()
		for _, st := range coupon.Statuses {
			_ = m.Codes(st)
		}
		for _, name := range m.SourceNames() {
			sm, _, err := m.ForSource(name)
			if err != nil {
				t.Fatalf("source %q of the mapping: %v", name, err)
			}
			if err := sm.Validate(); err != nil {
				t.Fatalf("source %q's mapping does not validate: %v", name, err)
			}
			_ = sm.SourceTables()
		}
	})
}

// fuzzValue turns a byte pair into a column value of any type the binlog
// may hand over (or a wrong one): NULL, integers of each width and sign,
// strings of digits or not, bytes, floats, decimals, times.
func fuzzValue(kind, v byte) any {
	switch kind % 11 {
	case 0:
		return nil
	case 1:
		return int64(v) % 5
	case 2:
		return uint64(v)
	case 3:
		return int32(-int32(v))
	case 4:
		return string(rune('0' + v%10))
	case 5:
		return []byte{v}
	case 6:
		return float64(v) / 3
	case 7:
		return "1e" + string(rune('0'+v%10))
	case 8:
		return time.Unix(int64(v)*1e7, 0)
	case 9:
		return strings.Repeat("x", int(v)%300)
	default:
		return int8(v % 4)
	}
}

// FuzzDecodeRows: row events of every mapped table of a legacy mapping,
// with random values of random types, NULLs, unknown codes, truncated
// rows and odd update pairs, are decoded or refused with an error; never
// a panic, and every decoded transition's states are couponlink's.
func FuzzDecodeRows(f *testing.F) {
	f.Add(byte(0), byte(0), []byte{1, 5, 1, 7, 2, 0, 0, 1, 1, 2})
	f.Add(byte(1), byte(1), []byte{2, 9, 1, 3, 0, 0, 4, 4, 1, 1, 2, 8, 1, 3})
	f.Add(byte(2), byte(2), []byte{9, 9, 9, 9})
	f.Add(byte(1), byte(3), []byte{})
	f.Fuzz(func(t *testing.T, tbl, action byte, data []byte) {
		m, err := LoadMapping([]byte(legacyYAML + "channel_quota: {table: t_quota, template: tpl_id, channel: ch, quota: quota, claimed: claimed}\n"))
		if err != nil {
			t.Fatal(err)
		}
		d := newDecoder(m)
		tables := []*schema.Table{
			table("legacydb", "t_user_coupon", "id", "tpl_id", "state", "order_no", "uid", "expire_time", "extra"),
			table("legacydb", "t_writeoff", "id", "coupon_id", "order_no"),
			table("legacydb", "t_quota", "tpl_id", "ch", "quota", "claimed"),
			table("legacydb", "t_coupon_tpl", "id", "budget"),
		}
		tb := tables[int(tbl)%len(tables)]
		act := []string{gocanal.InsertAction, gocanal.UpdateAction, gocanal.DeleteAction, "truncate"}[int(action)%4]
		var rows [][]any
		for len(data) >= 2 && len(rows) < 6 {
			width := len(tb.Columns)
			if data[0]%17 == 16 {
				width-- // a truncated row
			}
			row := make([]any, 0, width)
			for range width {
				if len(data) < 2 {
					break
				}
				row = append(row, fuzzValue(data[0], data[1]))
				data = data[2:]
			}
			rows = append(rows, row)
		}
		var b Batch
		if _, err := d.decode(ev(tb, act, rows...), &b); err != nil {
			return
		}
		for _, tr := range b.Transitions {
			for _, s := range []coupon.Status{tr.From, tr.To} {
				if s != coupon.None && !s.Valid() {
					t.Fatalf("a transition with a state couponlink does not have: %+v", tr)
				}
			}
		}
	})
}
