package webhook

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
)

func TestParseFormat(t *testing.T) {
	f, err := ParseFormat("", "x")
	require.NoError(t, err)
	assert.False(t, f.CloudEvents)
	f, err = ParseFormat("native", "x")
	require.NoError(t, err)
	assert.False(t, f.CloudEvents)
	f, err = ParseFormat("cloudevents", "eu west/1")
	require.NoError(t, err)
	assert.Equal(t, Format{CloudEvents: true, Source: "couponlink/cdc/eu%20west%2F1"}, f)
	_, err = ParseFormat("CloudEvents", "x")
	assert.ErrorContains(t, err, `event format "CloudEvents"`)
	assert.Equal(t, "couponlink/cdc/default", CloudEventsSource(""))
}

func TestCloudEventEnvelopeAndAttributes(t *testing.T) {
	body := []byte(`{"id":"0123456789abcdef0123456789abcdef","type":"channel.low","time":"2026-11-29T10:30:00.123456Z","template":7,"channel":"app","data":{"left":3}}`)
	m := Message{OutboxID: 1, ID: "0123456789abcdef0123456789abcdef", Type: ChannelLow, Body: body}
	env, attrs, err := CloudEvent(m, "couponlink/cdc/default")
	require.NoError(t, err)
	got, data, err := testenv.StructuredCloudEvent(env)
	require.NoError(t, err, "%s", env)
	assert.Equal(t, map[string]string{"specversion": "1.0", "id": m.ID, "source": "couponlink/cdc/default",
		"type": "io.couponlink.channel.low", "time": "2026-11-29T10:30:00.123456Z", "datacontenttype": "application/json"}, got)
	assert.Equal(t, got, attrs, "the binary attributes are the envelope's")
	assert.JSONEq(t, string(body), string(data), "data is the whole stored body")
	require.NoError(t, testenv.CheckCloudEvent(attrs))

	_, _, err = CloudEvent(Message{ID: "x", Type: ChannelLow, Body: []byte("not json")}, "s")
	assert.Error(t, err)
}

// TestCheckCloudEventIsStrict: the validator the sinks' tests use refuses
// what the spec does not allow.
func TestCheckCloudEventIsStrict(t *testing.T) {
	good := func() map[string]string {
		return map[string]string{"specversion": "1.0", "id": "a", "source": "couponlink/cdc/default", "type": "io.couponlink.x"}
	}
	require.NoError(t, testenv.CheckCloudEvent(good()))
	for name, edit := range map[string]func(map[string]string){
		"specversion 0.3":  func(a map[string]string) { a["specversion"] = "0.3" },
		"no id":            func(a map[string]string) { delete(a, "id") },
		"empty id":         func(a map[string]string) { a["id"] = "" },
		"no source":        func(a map[string]string) { delete(a, "source") },
		"bad source":       func(a map[string]string) { a["source"] = "%zz" },
		"no type":          func(a map[string]string) { delete(a, "type") },
		"bad time":         func(a map[string]string) { a["time"] = "29 Nov 2026" },
		"bad content type": func(a map[string]string) { a["datacontenttype"] = "json;;" },
		"upper-case name":  func(a map[string]string) { a["Source2"] = "x" },
	} {
		a := good()
		edit(a)
		assert.Error(t, testenv.CheckCloudEvent(a), name)
	}
	_, _, err := testenv.StructuredCloudEvent([]byte(`{"specversion":"1.0","id":"a","source":"s","type":"t","datacontenttype":"application/json"}`))
	assert.ErrorContains(t, err, "no data")
}

// TestCloudEventsWebhook: in CloudEvents format the webhook gets the
// structured envelope as application/cloudevents+json, signed over the
// bytes sent.
func TestCloudEventsWebhook(t *testing.T) {
	db := openDB(t)
	rc := newReceiver(t, nil)
	d := newTestDispatcher(t, db, rc.srv.URL, newFakeClock(), func(c *Config) {
		c.Format = Format{CloudEvents: true, Source: CloudEventsSource("default")}
	})
	at := time.Date(2026, 11, 29, 10, 30, 0, 0, time.UTC)
	enqueueCommitted(t, db, Event{Type: QuotaTransferred, Time: at, Template: 42, Channel: "wechat", Data: map[string]int64{"moved": 7}})
	n, err := d.Deliver(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	r := rc.requests()[0]
	assert.Equal(t, "application/cloudevents+json", r.Header.Get("Content-Type"))
	assert.True(t, Verify(testSecret, r.Body, r.Header.Get(HeaderSignature)), "the signature covers the envelope sent")
	attrs, data, err := testenv.StructuredCloudEvent(r.Body)
	require.NoError(t, err, "%s", r.Body)
	assert.Equal(t, "io.couponlink.quota.transferred", attrs["type"])
	assert.Equal(t, "couponlink/cdc/default", attrs["source"])
	assert.Equal(t, r.Header.Get(HeaderEventID), attrs["id"])
	assert.Equal(t, "2026-11-29T10:30:00Z", attrs["time"])
	var native Event
	require.NoError(t, json.Unmarshal(data, &native))
	assert.Equal(t, attrs["id"], native.ID)
	assert.Equal(t, int64(42), native.Template)
}
