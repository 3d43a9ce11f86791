package sink

import (
	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
)

// Pair names one channel bucket of a template.
type Pair struct {
	Template int64
	Channel  string
}

// Counts are the derived state counts of one pair, as in inventory_counter.
type Counts struct {
	Held, Used, Expired, Returned, Released int64
}

// Issued is every coupon ever claimed from the pair and still a row.
func (c Counts) Issued() int64 { return c.Held + c.Used + c.Expired + c.Returned }

// Frozen is the slots neither claimable, held nor used.
func (c Counts) Frozen() int64 { return c.Expired + c.Returned - c.Released }

// Taken is held + used + frozen: what the pair's quota must cover.
func (c Counts) Taken() int64 { return c.Held + c.Used + c.Frozen() }

func (c *Counts) add(o Counts) {
	c.Held += o.Held
	c.Used += o.Used
	c.Expired += o.Expired
	c.Returned += o.Returned
	c.Released += o.Released
}

// bump adds n to the count of status s.
func (c *Counts) bump(s coupon.Status, n int64) {
	switch s {
	case coupon.Available:
		c.Held += n
	case coupon.Used:
		c.Used += n
	case coupon.Expired:
		c.Expired += n
	case coupon.Returned:
		c.Returned += n
	}
}

// Deltas are the counter changes of one batch, per pair.
type Deltas map[Pair]*Counts

func (d Deltas) at(p Pair) *Counts {
	c := d[p]
	if c == nil {
		c = &Counts{}
		d[p] = c
	}
	return c
}

// Transition moves one coupon between states (and maybe between pairs).
func (d Deltas) Transition(t *canal.Transition) {
	if t.From != coupon.None {
		d.at(Pair{t.PrevTemplate, t.PrevChannel}).bump(t.From, -1)
	}
	if t.To != coupon.None {
		d.at(Pair{t.Template, t.Channel}).bump(t.To, +1)
	}
}

// Flow counts a release movement.
func (d Deltas) Flow(f *canal.Flow) {
	if f.Kind == coupon.FlowRelease {
		d.at(Pair{f.Template, f.Channel}).Released++
	}
}

// FromBatch computes the deltas of a batch.
func FromBatch(b *canal.Batch) Deltas {
	d := Deltas{}
	for i := range b.Transitions {
		d.Transition(&b.Transitions[i])
	}
	for i := range b.Flows {
		d.Flow(&b.Flows[i])
	}
	return d
}
