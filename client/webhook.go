package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Webhook signatures. Each webhook request carries
//
//	X-Couponlink-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>
//
// with one v1 per secret the cdc signs with (two while a secret is
// rotated). A receiver verifies it with VerifyWebhook on the raw body,
// before any JSON decoding, and refuses the request when it fails: a body
// changed by one byte, another secret, or a t older (or newer) than
// WebhookTolerance — a captured request replayed later. It should also
// dedupe on the event id (X-Couponlink-Event-Id): within the tolerance a
// replay verifies. This file uses the standard library only: a receiver
// written in Go may copy it as it is.

// WebhookSignatureHeader is the header of the signature.
const WebhookSignatureHeader = "X-Couponlink-Signature"

// WebhookTolerance is how far a signature's t may be from the receiver's
// clock.
const WebhookTolerance = 5 * time.Minute

// ErrWebhookSignature is the error of every signature VerifyWebhook
// refuses.
var ErrWebhookSignature = errors.New("webhook signature refused")

// SignWebhook is the header value of body signed at t with each of
// secrets (the cdc's side, and a receiver's tests).
func SignWebhook(t time.Time, body []byte, secrets ...[]byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	var b strings.Builder
	b.WriteString("t=" + ts)
	for _, s := range secrets {
		b.WriteString(",v1=" + hex.EncodeToString(webhookMAC(s, ts, body)))
	}
	return b.String()
}

// VerifyWebhook checks header, the X-Couponlink-Signature of body, at now:
// its t is within WebhookTolerance of now, and one of its v1 is the
// HMAC-SHA256 of t + "." + body under one of secrets (the current secret,
// and the previous one during a rotation). It compares in constant time.
func VerifyWebhook(header string, body []byte, now time.Time, secrets ...[]byte) error {
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if sum, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, sum)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("%w: not t=<unix>,v1=<hex>", ErrWebhookSignature)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > WebhookTolerance || d < -WebhookTolerance {
		return fmt.Errorf("%w: signed at t=%d, %s from now, beyond the tolerance of %s (a replayed request?)", ErrWebhookSignature, sec, d.Round(time.Second), WebhookTolerance)
	}
	ok := false
	for _, s := range secrets {
		want := webhookMAC(s, ts, body)
		for _, got := range sigs {
			if hmac.Equal(got, want) {
				ok = true
			}
		}
	}
	if !ok {
		return fmt.Errorf("%w: no v1 matches the body under the secrets", ErrWebhookSignature)
	}
	return nil
}

func webhookMAC(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts + "."))
	m.Write(body)
	return m.Sum(nil)
}
