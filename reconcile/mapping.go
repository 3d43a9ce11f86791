package reconcile

import (
	"context"
	"fmt"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
)

// resolve binds the mapping to the server for a pass: the shard tables a
// pattern matches now are those the pass counts and replays.
func (r *Reconciler) resolve(ctx context.Context) error {
	m, err := r.cfg.Mapping.Resolve(ctx, r.db)
	if err != nil {
		return fmt.Errorf("resolve the mapping: %w", err)
	}
	r.mu.Lock()
	r.src, r.resolved = inventory.NewQueries(m), m
	r.mu.Unlock()
	return nil
}

// queries is the queries of the mapping as the latest pass resolved it.
func (r *Reconciler) queries() *inventory.Queries {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.src
}

// mapping is the mapping as the latest pass resolved it.
func (r *Reconciler) mapping() *canal.Mapping {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resolved
}
