package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"
)

// apiClient calls couponlink api over loopback.
type apiClient struct {
	base string
	hc   *http.Client
}

func newAPIClient(addr string) *apiClient {
	return &apiClient{base: "http://" + addr, hc: &http.Client{Timeout: 15 * time.Second}}
}

// answer is one HTTP answer: its status, its error code (for 4xx) and body.
type answer struct {
	status int
	code   string
	body   []byte
}

// result names an answer for the table: "201", "200", an error code, "5xx"
// or "net_error" (no answer: the outcome is unknown).
func (a answer) result(err error) string {
	switch {
	case err != nil:
		return "net_error"
	case a.status >= 500:
		return "5xx"
	case a.status >= 400:
		if a.code != "" {
			return a.code
		}
		return fmt.Sprint(a.status)
	}
	return fmt.Sprint(a.status)
}

func (a answer) ok() bool { return a.status >= 200 && a.status < 300 }

func (c *apiClient) call(ctx context.Context, method, path string, in, out any) (answer, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return answer{}, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return answer{}, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return answer{}, err
	}
	a := answer{status: resp.StatusCode, body: b}
	if a.status >= 400 {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		a.code = e.Error.Code
	} else if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return a, fmt.Errorf("decode %s %s answer: %w", method, path, err)
		}
	}
	return a, nil
}

// waitHealthy polls GET /healthz until it answers 200 (bound: within).
func (c *apiClient) waitHealthy(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		a, err := c.call(ctx, http.MethodGet, "/healthz", nil, nil)
		if err == nil && a.status == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the api at %s did not answer /healthz 200 within %s (last: %d %v)", c.base, within, a.status, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // polling the condition
		}
	}
}

// tally counts operations by kind and result, and faults by kind.
type tally struct {
	mu     sync.Mutex
	ops    map[string]map[string]int
	faults map[string]int
}

func newTally() *tally {
	return &tally{ops: map[string]map[string]int{}, faults: map[string]int{}}
}

func (t *tally) op(kind, result string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ops[kind] == nil {
		t.ops[kind] = map[string]int{}
	}
	t.ops[kind][result]++
}

func (t *tally) fault(kind string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.faults[kind]++
}

func (t *tally) total() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, m := range t.ops {
		for _, v := range m {
			n += v
		}
	}
	return n
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var errStopped = errors.New("workload stopped")
