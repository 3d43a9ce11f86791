package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/couponlink/couponlink/webhook"
)

// receiver is the webhook receiver of the run: it records every delivered
// event id (with its body's id, which must be the same) and checks the
// signature. A fault takes it down (connections closed unanswered) or makes
// it slow for a while.
type receiver struct {
	secret string
	srv    *http.Server
	ln     net.Listener

	mu         sync.Mutex
	got        map[string]int // event id -> deliveries
	badSig     []string
	badID      []string
	downUntil  time.Time
	slowUntil  time.Time
	slowFor    time.Duration
	deliveries int
}

func newReceiver(secret string) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for webhooks: %w", err)
	}
	r := &receiver{secret: secret, ln: ln, got: map[string]int{}}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) url() string { return "http://" + r.ln.Addr().String() + "/hook" }

func (r *receiver) close() { _ = r.srv.Close() }

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	now := time.Now()
	down, slow := now.Before(r.downUntil), now.Before(r.slowUntil)
	slowFor := r.slowFor
	r.mu.Unlock()
	if down {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
				return
			}
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if slow {
		select {
		case <-time.After(slowFor):
		case <-req.Context().Done():
			return
		}
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	id := req.Header.Get(webhook.HeaderEventID)
	var ev struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(body, &ev)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deliveries++
	if !webhook.Verify([]byte(r.secret), body, req.Header.Get(webhook.HeaderSignature)) {
		r.badSig = append(r.badSig, id)
	}
	if ev.ID != id {
		r.badID = append(r.badID, fmt.Sprintf("header %q, body %q", id, ev.ID))
	}
	r.got[id]++
	w.WriteHeader(http.StatusNoContent)
}

// down makes the receiver close every connection for d.
func (r *receiver) down(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.downUntil = time.Now().Add(d)
}

// slow makes the receiver answer after delay, for d.
func (r *receiver) slow(d, delay time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.slowUntil, r.slowFor = time.Now().Add(d), delay
}

// heal ends a down or slow spell now.
func (r *receiver) heal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.downUntil, r.slowUntil = time.Time{}, time.Time{}
}

// received returns a copy of the delivered ids and the total deliveries.
func (r *receiver) received() (map[string]int, int, []string, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.got))
	for k, v := range r.got {
		out[k] = v
	}
	return out, r.deliveries, append([]string(nil), r.badSig...), append([]string(nil), r.badID...)
}

// shutdown stops the server.
func (r *receiver) shutdown(ctx context.Context) error {
	if err := r.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
