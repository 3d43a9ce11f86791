package canal

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/stretchr/testify/require"
)

// chanHandler hands a copy of every batch to the test.
type chanHandler struct {
	ch      chan Batch
	release chan struct{} // when set, ApplyBatch waits for it
}

func (h *chanHandler) ApplyBatch(ctx context.Context, b *Batch) error {
	c := *b
	c.Transitions = slices.Clone(b.Transitions)
	h.ch <- c
	if h.release != nil {
		select {
		case <-h.release:
		case <-ctx.Done():
		}
	}
	return nil
}

func txOf(coupons ...int64) *Batch {
	tx := &Batch{}
	for _, c := range coupons {
		tx.Transitions = append(tx.Transitions, Transition{Coupon: c})
		tx.Rows++
	}
	return tx
}

func beginGTID(t *testing.T, g gtidTracker, seq uint64) {
	require.NoError(t, g.begin(&replication.MariadbGTIDEvent{GTID: mysql.MariadbGTID{DomainID: 0, ServerID: 1, SequenceNumber: seq}}))
}

func TestBatcherWaitHeartbeatAndSize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{BatchRows: 3, BatchWait: 20 * time.Millisecond, HeartbeatPeriod: time.Second}
		gt, err := parseMariaGTIDs("0-1-10")
		require.NoError(t, err)
		st := &stats{}
		b := newBatcher(cfg, Position{File: "bin.000001", Pos: 4, GTID: "0-1-10"}, gt, st)
		h := &chanHandler{ch: make(chan Batch)}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() { _ = b.run(ctx, h) }()

		// One row, then silence: delivered BatchWait later without another event.
		t0 := time.Now()
		beginGTID(t, gt, 11)
		require.False(t, b.commit(txOf(1), "bin.000001", 100, 1000))
		got := <-h.ch
		require.Equal(t, 20*time.Millisecond, time.Since(t0))
		require.Equal(t, Position{File: "bin.000001", Pos: 100, GTID: "0-1-11"}, got.End)
		require.Equal(t, 1, got.Txns)
		require.False(t, got.Heartbeat)
		require.Equal(t, time.Unix(1000, 0), got.EventTime)

		// A commit of another schema moves the position; then idle: a heartbeat
		// HeartbeatPeriod after the last batch, carrying the new position.
		beginGTID(t, gt, 12)
		st.events.Add(1)
		b.commit(&Batch{}, "bin.000001", 200, 1001)
		got = <-h.ch
		require.Equal(t, 20*time.Millisecond+time.Second, time.Since(t0))
		require.True(t, got.Heartbeat)
		require.Equal(t, Position{File: "bin.000001", Pos: 200, GTID: "0-1-12"}, got.End)
		require.Equal(t, time.Unix(1001, 0), got.EventTime) // events arrived since the last batch
		got = <-h.ch                                        // idle: EventTime is now, lag 0
		require.True(t, got.Heartbeat)
		require.Equal(t, time.Now(), got.EventTime)

		// A full batch goes at once, at the end of the transaction that filled it.
		t1 := time.Now()
		beginGTID(t, gt, 13)
		require.False(t, b.commit(txOf(2, 3), "bin.000001", 300, 1002))
		beginGTID(t, gt, 14)
		full := b.commit(txOf(4, 5), "bin.000001", 400, 1003)
		got = <-h.ch
		require.Equal(t, t1, time.Now())
		require.True(t, full)
		require.Equal(t, 4, got.Rows)
		require.Equal(t, 2, got.Txns)
		require.Equal(t, "0-1-14", got.End.GTID)
		require.Equal(t, []int64{2, 3, 4, 5}, couponsOf(got.Transitions))
	})
}

func TestBatcherBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{BatchRows: 2, BatchWait: time.Millisecond, HeartbeatPeriod: time.Hour}
		b := newBatcher(cfg, Position{File: "bin.000001", Pos: 4}, nil, &stats{})
		h := &chanHandler{ch: make(chan Batch), release: make(chan struct{})}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() { _ = b.run(ctx, h) }()

		require.True(t, b.commit(txOf(1, 2), "bin.000001", 10, 1))
		first := <-h.ch // the handler now holds the first batch
		require.Equal(t, []int64{1, 2}, couponsOf(first.Transitions))
		require.NoError(t, b.waitRoom(ctx))

		// The next batch fills while the handler is busy: the reader waits.
		require.True(t, b.commit(txOf(3, 4, 5), "bin.000001", 20, 2))
		done := make(chan error)
		go func() { done <- b.waitRoom(ctx) }()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("the reader did not wait for the busy handler")
		default:
		}
		h.release <- struct{}{} // first batch applied
		second := <-h.ch
		require.NoError(t, <-done)
		require.Equal(t, []int64{3, 4, 5}, couponsOf(second.Transitions))
		require.Equal(t, Position{File: "bin.000001", Pos: 20}, second.End)
		h.release <- struct{}{}
	})
}

func couponsOf(ts []Transition) []int64 {
	var out []int64
	for _, t := range ts {
		out = append(out, t.Coupon)
	}
	return out
}

func TestMariaGTIDs(t *testing.T) {
	g, err := parseMariaGTIDs("1-2-7, 0-1-42")
	require.NoError(t, err)
	require.Equal(t, "0-1-42,1-2-7", g.String())
	beginGTID(t, g, 43)
	require.Equal(t, "0-1-42,1-2-7", g.String()) // not committed yet
	g.commit()
	require.Equal(t, "0-1-43,1-2-7", g.String())
	require.NoError(t, g.begin(&replication.MariadbGTIDEvent{GTID: mysql.MariadbGTID{DomainID: 5, ServerID: 3, SequenceNumber: 1}}))
	g.discard()
	g.commit()
	require.Equal(t, "0-1-43,1-2-7", g.String())
	_, err = parseMariaGTIDs("0-1")
	require.Error(t, err)

	p := Position{File: "mysql-bin.000010", Pos: 4}
	require.Equal(t, 1, p.Compare(Position{File: "mysql-bin.000009", Pos: 900}))
	require.Equal(t, -1, p.Compare(Position{File: "mysql-bin.000010", Pos: 5}))
	require.Equal(t, 0, p.Compare(p))
	require.Equal(t, "mysql-bin.000010:4 gtid=0-1-5", Position{File: "mysql-bin.000010", Pos: 4, GTID: "0-1-5"}.String())
}
