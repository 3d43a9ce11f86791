package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/couponlink/couponlink/client"
	"github.com/couponlink/couponlink/internal/redact"
)

// httpSink is the webhook receiver as a Sink: each event POSTed, signed
// (HMAC-SHA256 of the stored body), with quick retries inside one call.
type httpSink struct {
	url     string
	secrets [][]byte         // the current, and during a rotation the previous
	legacy  bool             // also the old body-only signature
	format  Format           // native: the stored body; CloudEvents: its structured envelope
	now     func() time.Time // the signatures' t: the wall clock, which receivers compare with theirs
	client  *retryablehttp.Client
}

func newHTTPSink(cfg Config, log *slog.Logger) *httpSink {
	secrets := [][]byte{cfg.Secret}
	if len(cfg.PreviousSecret) > 0 {
		secrets = append(secrets, cfg.PreviousSecret)
	}
	return &httpSink{url: cfg.URL, secrets: secrets, legacy: cfg.LegacySignature, format: cfg.Format, now: time.Now, client: newHTTPClient(cfg, log)}
}

// Name is "webhook": the sink label of the receiver's deliveries.
func (h *httpSink) Name() string { return "webhook" }

// Send POSTs the events one after the other; it stops at the first the
// receiver did not take (a 2xx answer).
func (h *httpSink) Send(ctx context.Context, msgs []Message) (int, error) {
	for i, m := range msgs {
		if err := h.post(ctx, m); err != nil {
			return i, err
		}
	}
	return len(msgs), nil
}

// Close drops the idle connections.
func (h *httpSink) Close() error {
	h.client.HTTPClient.CloseIdleConnections()
	return nil
}

// newClient builds the retrying HTTP client: quick retries on connection
// errors, 429 and 5xx; redirects are not followed (a 3xx is a failed round).
func newHTTPClient(cfg Config, log *slog.Logger) *retryablehttp.Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = sendParallel
	c := retryablehttp.NewClient()
	c.HTTPClient = &http.Client{
		Timeout:       cfg.Timeout,
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	c.Logger = debugLogger{log}
	c.RetryMax = cfg.Retries
	c.RetryWaitMin = retryWaitMin
	c.RetryWaitMax = retryWaitMax
	// a Retry-After header may ask for longer; a round does not wait for
	// it (the next round's backoff is the long wait)
	c.Backoff = func(lo, hi time.Duration, attempt int, resp *http.Response) time.Duration {
		return min(retryablehttp.DefaultBackoff(lo, hi, attempt, resp), hi)
	}
	// hand back the last answer, so a 5xx after the retries is reported
	// with its status rather than as "giving up"
	c.ErrorHandler = retryablehttp.PassthroughErrorHandler
	return c
}

// post POSTs one stored body (in CloudEvents format, its structured
// envelope), signed, with quick retries. Any answer but 2xx is an error.
// The signatures cover the bytes sent.
func (h *httpSink) post(ctx context.Context, r Message) error {
	body, contentType := r.Body, "application/json"
	if h.format.CloudEvents {
		env, _, err := CloudEvent(r, h.format.Source)
		if err != nil {
			return Refused(err)
		}
		body, contentType = env, CloudEventsContentType
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, h.url, body)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", "couponlink-webhook")
	req.Header.Set(HeaderEvent, r.Type)
	req.Header.Set(HeaderEventID, r.ID)
	req.Header.Set(HeaderSignature, client.SignWebhook(h.now(), body, h.secrets...))
	if h.legacy {
		req.Header.Set(HeaderBodySignature, Sign(h.secrets[0], body))
	}
	resp, err := h.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) { // it quotes the URL, whose token= or password is a secret
			ue.URL = redact.String(h.url)
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return fmt.Errorf("receiver answered %s: %s", resp.Status, strings.TrimSpace(string(snippet)))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // to reuse the connection
	return nil
}

// debugLogger hands retryablehttp's per-request chatter to slog at Debug:
// the dispatcher logs each round's outcome itself.
type debugLogger struct{ l *slog.Logger }

func (a debugLogger) Error(msg string, kv ...any) { a.l.Debug("webhook http: "+msg, kv...) }
func (a debugLogger) Info(msg string, kv ...any)  { a.l.Debug("webhook http: "+msg, kv...) }
func (a debugLogger) Debug(msg string, kv ...any) { a.l.Debug("webhook http: "+msg, kv...) }
func (a debugLogger) Warn(msg string, kv ...any)  { a.l.Debug("webhook http: "+msg, kv...) }
