package redact_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/couponlink/couponlink/internal/redact"
)

func TestStringHidesEverySecret(t *testing.T) {
	for in, want := range map[string]string{
		"":                                           "",
		"root@tcp(127.0.0.1:3307)/couponlink":        "root@tcp(127.0.0.1:3307)/couponlink",
		"u:Pw-s3cr3t@tcp(db:3306)/couponlink":        "u:xxxxx@tcp(db:3306)/couponlink",
		"u:Pw@x/y@tcp(db:3306)/c?parseTime=true":     "u:xxxxx@tcp(db:3306)/c?parseTime=true",
		"https://hook:Pw-s3cr3t@example.com/in":      "https://hook:xxxxx@example.com/in",
		"https://example.com/in?token=Pw-s3cr3t&x=1": "https://example.com/in?token=xxxxx&x=1",
		"redis://:Pw-s3cr3t@r:6379/0?maxlen=10,nats://u:Pw-s3cr3t@n:4222/s": "redis://:xxxxx@r:6379/0?maxlen=10,nats://u:xxxxx@n:4222/s",
		"rediss://default:Pw-s3cr3t@r:6380":                                 "rediss://default:xxxxx@r:6380",
		"http://u:Pw s3cr3t@bad host/%zz":                                   "http://u:xxxxx@bad host/%zz",
		"127.0.0.1:6380":                                                    "127.0.0.1:6380",
	} {
		got := redact.String(in)
		assert.Equal(t, want, got, in)
		assert.NotContains(t, got, "s3cr3t", in)
	}
}

// Text masks the secrets of the settings an error or a log line quotes,
// wherever they stand in it: the messages below are the ones libraries
// build (net/http's url.Error, go-redis's dial error, go-sql-driver's).
func TestTextHidesSecretsInsideMessages(t *testing.T) {
	for in, want := range map[string]string{
		`Post "http://hook:***@127.0.0.1:9/in?token=Pw-s3cr3t": dial tcp 127.0.0.1:9: connect: connection refused`: `Post "http://hook:xxxxx@127.0.0.1:9/in?token=xxxxx": dial tcp 127.0.0.1:9: connect: connection refused`,
		`dial tcp: address redis://default:Pw-s3cr3t@127.0.0.1:6404: too many colons`:                              `dial tcp: address redis://default:xxxxx@127.0.0.1:6404: too many colons`,
		`open u:Pw-s3cr3t@tcp(db:3306)/couponlink: refused`:                                                        `open u:xxxxx@tcp(db:3306)/couponlink: refused`,
		`GET /metrics?x=1&access_token=Pw-s3cr3t failed`:                                                           `GET /metrics?x=1&access_token=xxxxx failed`,
		`redis: connection pool: failed to dial after 5 attempts: dial tcp 127.0.0.1:6379: connect: refused`:       `redis: connection pool: failed to dial after 5 attempts: dial tcp 127.0.0.1:6379: connect: refused`,
		`Redis redis://u:Pw-s3cr3t@h:1,rediss://u:Pw-s3cr3t@h:2/0 down`:                                            `Redis redis://u:xxxxx@h:1,rediss://u:xxxxx@h:2/0 down`,
		`gtid=0-1-5 coupon=7 from=AVAILABLE`:                                                                       `gtid=0-1-5 coupon=7 from=AVAILABLE`,
		`Access denied for user 'app'@'127.0.0.1' (using password: YES)`:                                           `Access denied for user 'app'@'127.0.0.1' (using password: YES)`,
	} {
		got := redact.Text(in)
		assert.Equal(t, want, got, in)
		assert.NotContains(t, got, "s3cr3t", in)
	}
	plain := errors.New("no secret here")
	assert.Same(t, plain, redact.Error(plain), "an error without a secret is kept as is")
	wrapped := redact.Error(fmt.Errorf("send: %w", &url.Error{Op: "Post", URL: "http://h/in?token=Pw-s3cr3t", Err: io.EOF}))
	assert.NotContains(t, wrapped.Error(), "s3cr3t")
	assert.ErrorIs(t, wrapped, io.EOF, "the masked error still unwraps")
}

// Every line a logger through Handler writes is masked: the message, a
// string, an error, a Stringer (*url.URL), a group's and a With's values.
func TestHandlerMasksEveryAttribute(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(redact.Handler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	u, _ := url.Parse("https://u:Pw-s3cr3t@h/in?token=Pw-s3cr3t")
	log.With("dsn", "u:Pw-s3cr3t@tcp(db:3306)/c").WithGroup("g").Debug("dial redis://:Pw-s3cr3t@r:6379 failed",
		"err", errors.New(`Post "http://h/in?token=Pw-s3cr3t": EOF`), "url", u, "addr", "rediss://default:Pw-s3cr3t@r:6380",
		slog.Group("sink", "url", "nats://u:Pw-s3cr3t@n:4222"), "list", []string{"redis://:Pw-s3cr3t@r:1"})
	out := buf.String()
	assert.NotContains(t, out, "s3cr3t", out)
	for _, kept := range []string{"dial redis://:xxxxx@r:6379 failed", "token=xxxxx", "u:xxxxx@tcp(db:3306)/c", "g.sink.url=nats://u:xxxxx@n:4222"} {
		assert.Contains(t, out, kept)
	}
}
