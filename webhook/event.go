// Package webhook tells outside receivers what the cdc saw: quota
// recommendations and transfers, releases, sold-out and low channels,
// anomalies, and reconcile passes that need a person. The receivers are
// the webhook (Dispatcher) and stream sinks (Relay, package streams).
//
// Events go through an outbox: Enqueue writes them into webhook_outbox in
// the transaction of the change they report, so an event exists if and
// only if its change committed, and a receiver that is down never blocks
// the cdc. A Dispatcher then POSTs each stored body, signed with
// HMAC-SHA256, retrying with backoff until it is delivered or, after
// MaxAttempts rounds, dropped (counted and logged). Delivery is
// at-least-once: receivers dedupe on the event id.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/couponlink/couponlink/client"
)

// Event types.
const (
	QuotaRecommendation = "quota.recommendation"
	QuotaTransferred    = "quota.transferred"
	QuotaReleased       = "quota.released"
	ChannelSoldOut      = "channel.sold_out"
	ChannelLow          = "channel.low"
	AnomalyDetected     = "anomaly.detected"
	ReconcileReview     = "reconcile.needs_review"
	ReconcileCorrected  = "reconcile.corrected"
)

// Types lists every event type, for metrics and validation.
var Types = []string{QuotaRecommendation, QuotaTransferred, QuotaReleased, ChannelSoldOut, ChannelLow, AnomalyDetected, ReconcileReview, ReconcileCorrected}

// Headers of a delivery request.
const (
	// HeaderSignature is "t=<unix>,v1=<hex HMAC-SHA256(secret, t + "." +
	// body)>", a v1 per secret (client.SignWebhook, client.VerifyWebhook).
	HeaderSignature = client.WebhookSignatureHeader
	// HeaderBodySignature is the old signature, "sha256=" + hex
	// HMAC-SHA256 of the body alone (no time: replayable), sent only with
	// Config.LegacySignature, for one release.
	HeaderBodySignature = "X-Couponlink-Body-Signature"
	HeaderEventID       = "X-Couponlink-Event-Id" // the event's id, as in the body
	HeaderEvent         = "X-Couponlink-Event"    // the event's type, as in the body
)

// maxChannel is the width of webhook_outbox.channel.
const maxChannel = 64

// Event is one webhook event, as its JSON body.
type Event struct {
	ID       string    `json:"id"`   // 32 hex chars; receivers dedupe on it; stable across retries (stored)
	Type     string    `json:"type"` // one of Types
	Time     time.Time `json:"time"` // when the change happened (UTC)
	Template int64     `json:"template,omitempty"`
	Channel  string    `json:"channel,omitempty"`
	Data     any       `json:"data"` // the numbers
}

// NewID returns a new event id: 16 random bytes (crypto/rand) in hex.
func NewID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand.Read crashes the program instead)
	return hex.EncodeToString(b)
}

// Enqueue writes events to the outbox inside tx — the transaction of the
// change they report, so an event exists if and only if its change
// committed. It fills an empty ID (NewID) and a zero Time (time.Now), sets
// Time to UTC, marshals each event once (those bytes are what gets signed
// and sent) and writes them with one multi-row INSERT. The caller's events
// are not modified. No events: no-op.
func Enqueue(ctx context.Context, tx *sql.Tx, events ...Event) error {
	if len(events) == 0 {
		return nil
	}
	now := time.Now().UTC()
	var b strings.Builder
	args := make([]any, 0, len(events)*7)
	for i, e := range events {
		if e.ID == "" {
			e.ID = NewID()
		}
		if e.Time.IsZero() {
			e.Time = now
		}
		e.Time = e.Time.UTC()
		if err := validate(e); err != nil {
			return fmt.Errorf("enqueue webhook event %d of %d: %w", i+1, len(events), err)
		}
		body, err := JSON(e)
		if err != nil {
			return fmt.Errorf("marshal webhook event %s (%s): %w", e.ID, e.Type, err)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?)")
		args = append(args, e.ID, e.Type, nullTemplate(e.Template), nullChannel(e.Channel), body, now, now)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_outbox (event_id, event, template_id, channel, body,
		next_attempt_at, created_at) VALUES `+b.String(), args...); err != nil {
		return fmt.Errorf("write %d webhook events to the outbox: %w", len(events), err)
	}
	return nil
}

// validate refuses what the outbox or the receivers cannot take.
func validate(e Event) error {
	if !slices.Contains(Types, e.Type) {
		return fmt.Errorf("unknown event type %q", e.Type)
	}
	if len(e.ID) != 32 {
		return fmt.Errorf("event id %q is not 32 hex characters", e.ID)
	}
	if _, err := hex.DecodeString(e.ID); err != nil {
		return fmt.Errorf("event id %q is not 32 hex characters", e.ID)
	}
	if e.Template < 0 {
		return fmt.Errorf("event %s: negative template %d", e.ID, e.Template)
	}
	if len([]rune(e.Channel)) > maxChannel {
		return fmt.Errorf("event %s: channel longer than %d characters", e.ID, maxChannel)
	}
	return nil
}

func nullTemplate(t int64) any {
	if t == 0 {
		return nil
	}
	return t
}

func nullChannel(c string) any {
	if c == "" {
		return nil
	}
	return c
}

// Sign returns the old signature of body (HeaderBodySignature): "sha256="
// followed by the hex HMAC-SHA256 of body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify says whether header (HeaderSignature) is a signature of body
// under secret, made within client.WebhookTolerance of now
// (client.VerifyWebhook). Receivers must pass the raw body bytes, before
// any JSON decoding.
func Verify(secret, body []byte, header string) bool {
	return client.VerifyWebhook(header, body, time.Now(), secret) == nil
}

// VerifyBody says whether header is the old signature of body under
// secret (HeaderBodySignature). It compares in constant time.
func VerifyBody(secret, body []byte, header string) bool {
	got, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	sum, err := hex.DecodeString(got)
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hmac.Equal(sum, m.Sum(nil))
}

// JSON encodes v as event bodies are encoded: without encoding/json's HTML
// escaping, so that the rules' "<" and ">" stay readable to a person.
func JSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
