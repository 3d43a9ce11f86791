package webhook

import (
	"sync"
	"time"
)

// warnEvery bounds how often one sink's failures are logged: a sink that
// cannot connect, authenticate or publish warns at its first failure, then
// at most once per warnEvery with the count of failures since (every
// failure is counted in couponlink_event_deliveries_total{result="failed"}
// and its error kept for the status: event_sink_position.last_error, the
// outbox row's last_error).
const warnEvery = time.Minute

// failWarn says which failures of one sink to log.
type failWarn struct {
	mu      sync.Mutex
	warned  time.Time // when the last warning was logged (zero: none since the last success)
	skipped int       // failures not logged since then
}

// failed records a failure at now; warn says whether to log it, skipped
// how many failures were not logged since the last warning.
func (w *failWarn) failed(now time.Time) (warn bool, skipped int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.warned.IsZero() && now.Sub(w.warned) < warnEvery {
		w.skipped++
		return false, 0
	}
	skipped, w.warned, w.skipped = w.skipped, now, 0
	return true, skipped
}

// ok records a success: the next failure warns at once.
func (w *failWarn) ok() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warned, w.skipped = time.Time{}, 0
}
