package redisconn

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A note go-redis repeats (a pool that cannot dial, at every try) is
// logged once per noteEvery with the count of the repeats not logged; a
// password in it is masked; another note is logged at once.
func TestRedisNotesLoggedOncePerWindow(t *testing.T) {
	var buf bytes.Buffer
	log, lines := slog.New(slog.NewTextHandler(&buf, nil)), buf.String
	now := time.Unix(1000, 0)
	l := newRedisLogger(log, func() time.Time { return now })
	note := "redis: connection pool: failed to dial after 5 attempts: dial tcp 127.0.0.1:1: connect: connection refused (redis://u:Secret9@127.0.0.1:1)"
	for range 10 {
		l.Printf(context.Background(), "%s", note)
		now = now.Add(time.Second)
	}
	l.Printf(context.Background(), "redis: another note")
	require.Equal(t, 2, strings.Count(lines(), "redis client: "), lines())
	now = now.Add(noteEvery)
	l.Printf(context.Background(), "%s", note)
	out := lines()
	require.Equal(t, 2, strings.Count(out, "redis client: redis: connection pool"), out)
	require.Contains(t, out, "repeats_not_logged=9")
	require.NotContains(t, out, "Secret9")
}
