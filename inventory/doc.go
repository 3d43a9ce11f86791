// Package inventory is the read model: what the counters, the checkpoint,
// the live truth and the Redis keys say, for every reader.
//
// It holds the bucket key (Pair), the one count type (Counts) with the
// quota of a bucket (Quota), the deltas of a decoded batch, the consistent
// snapshot of the source tables and every query on them (Queries), the
// checkpoint and the counters as the cdc left them, the derived and the
// live view of a template that the API shows, what `couponlink status`
// prints (summed over a mapping's sources, each source read on its own
// server: sources.go), and the Redis key scheme and modes. It never writes: package
// sink writes the counters, the checkpoint and couponlink's Redis keys;
// the reconciler, the API, status and the tests read them through here.
package inventory
