package webhook

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A round whose record of its deliveries is a deadlock's victim records
// them on the next run: sent events left pending would be sent again when
// the lease ends (seen as a batch sent twice by two dispatchers).
func TestRecordSurvivesADeadlock(t *testing.T) {
	db := openDB(t)
	sending, release := make(chan struct{}, 2), make(chan struct{})
	rc := newReceiver(t, func(int, request) int { sending <- struct{}{}; <-release; return 200 })
	d := newTestDispatcher(t, db, rc.srv.URL, nil, func(c *Config) { c.BatchSize = 2 })
	ctx := context.Background()
	enqueueCommitted(t, db, someEvents(10)...)
	var first, second int64
	require.NoError(t, db.QueryRow(`SELECT MIN(id), MIN(id) + 1 FROM webhook_outbox`).Scan(&first, &second))
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() { n, err := d.Deliver(ctx); done <- result{n, err} }()
	<-sending // the round claimed its two rows and sends them

	// another writer holds the round's second row and rows of its own, so
	// that the deadlock below picks the round (the lighter) as its victim
	other, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer other.Rollback()
	_, err = other.ExecContext(ctx, `UPDATE webhook_outbox SET last_error = 'held' WHERE id = ? OR id > ?`, second, second)
	require.NoError(t, err)
	close(release)
	require.Eventually(t, func() bool { // the round's record holds the first row, waits for the second
		var n int
		err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.INNODB_TRX
			WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE 'SELECT id FROM webhook_outbox%'`).Scan(&n)
		return err == nil && n == 1
	}, 10*time.Second, 200*time.Millisecond) // INNODB_TRX is refreshed only when last read over 0.1 s ago
	var id int64
	require.NoError(t, other.QueryRowContext(ctx, `SELECT id FROM webhook_outbox WHERE id = ? FOR UPDATE`, first).Scan(&id))
	require.NoError(t, other.Rollback())

	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, 2, r.n)
	assert.Len(t, rc.requests(), 2)
	var delivered int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM webhook_outbox WHERE status = ? AND id IN (?, ?)`,
		statusDelivered, first, second).Scan(&delivered))
	assert.Equal(t, 2, delivered)
}
