// Package client is a Go client of couponlink's HTTP API (the routes of
// coupon/httpapi, described by its openapi.json): a typed call per route,
// request ids generated when the caller gives none, bounded retries with
// backoff on the calls that are safe to repeat, and errors as *Error
// values carrying the API's code.
//
// Retried (the call is idempotent): every GET; Claim and Void (their
// request_id is the idempotency key: the client fills an empty one once,
// before the first attempt, so every attempt carries the same); Redeem
// (the key is user_coupon_id and order_id); Refund (user_coupon_id,
// order_id, mode); Expire (a sweep moves only what is due). Not retried:
// CreateTemplate (no key: a retry could create a second template),
// SetQuotaPolicy and ResetQuotaPolicy (each is an audited version).
//
// A retry happens after a transport error (connection refused or reset,
// an EOF before the answer), a 502, 503 or 504, and a 409 conflict (the
// server lost a race); never after the context ends.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/couponlink/couponlink/api"
)

// Defaults of the options.
const (
	DefaultMaxAttempts = 4
	DefaultBackoff     = 50 * time.Millisecond
	DefaultMaxBackoff  = 2 * time.Second
	maxErrorBody       = 64 << 10
)

// Client calls one couponlink API. It is safe for concurrent use.
type Client struct {
	base        string
	token       string
	hc          *http.Client
	maxAttempts int
	backoff     time.Duration
	maxBackoff  time.Duration
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends "Authorization: Bearer <token>" (the server's
// COUPONLINK_API_TOKEN) on every call.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient sends the calls through hc (its transport, its timeout).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetries sets the attempts of a retried call (1: no retries) and the
// backoff before the second attempt, doubled each time up to maxBackoff,
// with full jitter.
func WithRetries(maxAttempts int, backoff, maxBackoff time.Duration) Option {
	return func(c *Client) {
		c.maxAttempts, c.backoff, c.maxBackoff = max(maxAttempts, 1), backoff, max(maxBackoff, backoff)
	}
}

// New returns a client of the API at baseURL ("http://127.0.0.1:8080").
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimSuffix(baseURL, "/"), maxAttempts: DefaultMaxAttempts, backoff: DefaultBackoff, maxBackoff: DefaultMaxBackoff}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		c.hc = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	}
	return c
}

// NewRequestID returns a new idempotency key: 16 random bytes
// (crypto/rand) in hex.
func NewRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand.Read crashes the program instead)
	return hex.EncodeToString(b)
}

// get is a GET of path, retried, its answer decoded into a T.
func get[T any](ctx context.Context, c *Client, path string) (T, error) {
	return send[T](ctx, c, http.MethodGet, path, nil, true)
}

// send is c.call of one route whose answer is a T.
func send[T any](ctx context.Context, c *Client, method, path string, body any, retry bool) (T, error) {
	var out T
	err := c.call(ctx, method, path, body, &out, retry)
	return out, err
}

// call is one route: the body (nil: none) encoded once, sent up to
// maxAttempts times when retry is set, the answer decoded into out (nil:
// discarded; *[]byte: the raw body).
func (c *Client) call(ctx context.Context, method, path string, body, out any, retry bool) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
	}
	attempts := 1
	if retry {
		attempts = c.maxAttempts
	}
	for attempt := 1; ; attempt++ {
		err := c.once(ctx, method, path, payload, out)
		if err == nil || attempt >= attempts || !retryable(err) || ctx.Err() != nil {
			return err
		}
		if werr := c.wait(ctx, attempt); werr != nil {
			return fmt.Errorf("%w; the last attempt: %w", werr, err)
		}
	}
}

// once sends one attempt.
func (c *Client) once(ctx context.Context, method, path string, payload []byte, out any) error {
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return &transportError{err: fmt.Errorf("%s %s: %w", method, path, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return decodeError(resp)
	}
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
	} else if raw, ok := out.(*[]byte); ok {
		*raw, err = io.ReadAll(resp.Body)
	} else {
		err = json.NewDecoder(resp.Body).Decode(out)
	}
	if err != nil {
		return &transportError{err: fmt.Errorf("read the answer of %s %s: %w", method, path, err)}
	}
	return nil
}

// transportError is a failure to send or to read the answer: the request
// may or may not have been served.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

func retryable(err error) bool {
	var te *transportError
	if errors.As(err, &te) {
		return true
	}
	var e *Error
	if errors.As(err, &e) {
		switch e.Status {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return e.Code == CodeConflict
	}
	return false
}

// wait sleeps before attempt+1: backoff doubled per attempt, capped, full
// jitter; it returns early with the context's error.
func (c *Client) wait(ctx context.Context, attempt int) error {
	d := c.backoff << min(attempt-1, 20)
	if d > c.maxBackoff || d <= 0 {
		d = c.maxBackoff
	}
	if d > 0 {
		d = mathrand.N(d) + 1
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// decodeError reads a failed answer: the API's error shape, or whatever
// a proxy put there.
func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var body api.ErrorBody
	if json.Unmarshal(b, &body) == nil && body.Error != nil && body.Error.Code != "" {
		return &Error{Status: resp.StatusCode, Code: body.Error.Code, Field: body.Error.Field, Message: body.Error.Message}
	}
	return &Error{Status: resp.StatusCode, Message: strings.TrimSpace(string(b))}
}
