package inventory

import (
	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory/view"
)

// Pair names one channel bucket of a template.
type Pair struct {
	Template int64
	Channel  string
}

// Less orders pairs by template, then channel.
func (p Pair) Less(o Pair) bool {
	if p.Template != o.Template {
		return p.Template < o.Template
	}
	return p.Channel < o.Channel
}

// Counts are the states of a channel bucket's (or a template's) quota:
// the one count type of the read model. It is defined in package view,
// which the API links without the binlog reader; see view.Counts.
type Counts = view.Counts

// Quota is one channel bucket: its quota and how much of it is claimed.
type Quota struct {
	Quota, Claimed int64
}

// Claimable is what is left to give out.
func (q Quota) Claimable() int64 { return q.Quota - q.Claimed }

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
		d.at(Pair{t.PrevTemplate, t.PrevChannel}).Bump(t.From, -1)
	}
	if t.To != coupon.None {
		d.at(Pair{t.Template, t.Channel}).Bump(t.To, +1)
	}
}

// Flow counts a release movement.
func (d Deltas) Flow(f *canal.Flow) {
	if f.Kind == coupon.FlowRelease {
		d.at(Pair{f.Template, f.Channel}).Released++
	}
}

// Batch adds the deltas of a batch.
func (d Deltas) Batch(b *canal.Batch) {
	for i := range b.Transitions {
		d.Transition(&b.Transitions[i])
	}
	for i := range b.Flows {
		d.Flow(&b.Flows[i])
	}
}

// FromBatch computes the deltas of a batch.
func FromBatch(b *canal.Batch) Deltas {
	d := Deltas{}
	d.Batch(b)
	return d
}
