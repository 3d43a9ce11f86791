package redact_test

import (
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
