package client_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/couponlink/couponlink/client"
)

func TestVerifyWebhook(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"0123","type":"channel.sold_out"}`)
	current, previous, other := []byte("current-secret"), []byte("previous-secret"), []byte("other")
	sig := client.SignWebhook(now, body, current)
	assert.Regexp(t, `^t=1800000000,v1=[0-9a-f]{64}$`, sig)
	assert.NoError(t, client.VerifyWebhook(sig, body, now, current))
	assert.NoError(t, client.VerifyWebhook(sig, body, now.Add(client.WebhookTolerance), current), "at the edge of the tolerance")

	// a replayed request: its t is too old (or too far ahead)
	assert.ErrorIs(t, client.VerifyWebhook(sig, body, now.Add(client.WebhookTolerance+time.Second), current), client.ErrWebhookSignature)
	assert.ErrorIs(t, client.VerifyWebhook(sig, body, now.Add(-client.WebhookTolerance-time.Second), current), client.ErrWebhookSignature)
	// a body changed by one byte, another secret, a t changed
	for i := range body {
		changed := append([]byte(nil), body...)
		changed[i] ^= 0x01
		assert.ErrorIs(t, client.VerifyWebhook(sig, changed, now, current), client.ErrWebhookSignature, "byte %d", i)
	}
	assert.ErrorIs(t, client.VerifyWebhook(sig, body, now, other), client.ErrWebhookSignature)
	moved := client.SignWebhook(now.Add(time.Second), body, current)[:len("t=1800000001")] + sig[len("t=1800000000"):]
	assert.ErrorIs(t, client.VerifyWebhook(moved, body, now, current), client.ErrWebhookSignature, "a t changed without its v1")
	for _, bad := range []string{"", "sha256=00", "t=1800000000", "v1=00", "t=x,v1=00"} {
		assert.ErrorIs(t, client.VerifyWebhook(bad, body, now, current), client.ErrWebhookSignature, bad)
	}

	// rotation: signed with both secrets (v1 twice), a receiver with
	// either accepts it; one signed with the previous secret only is
	// accepted by a receiver that knows both
	both := client.SignWebhook(now, body, current, previous)
	assert.Regexp(t, `^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$`, both)
	assert.NoError(t, client.VerifyWebhook(both, body, now, current))
	assert.NoError(t, client.VerifyWebhook(both, body, now, previous))
	assert.NoError(t, client.VerifyWebhook(client.SignWebhook(now, body, previous), body, now, current, previous))
	assert.ErrorIs(t, client.VerifyWebhook(both, body, now, other), client.ErrWebhookSignature)
}
