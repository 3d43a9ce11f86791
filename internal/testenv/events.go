package testenv

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// StreamEntries reads a whole Redis stream of events (the fields id and
// body, as streams.RedisStream writes them): per event id, how many entries,
// and each id's body.
func StreamEntries(t testing.TB, rdb *redis.Client, stream string) (count map[string]int, bodies map[string]string) {
	t.Helper()
	entries, err := rdb.XRange(context.Background(), stream, "-", "+").Result()
	require.NoError(t, err)
	count, bodies = map[string]int{}, map[string]string{}
	for _, e := range entries {
		id, _ := e.Values["id"].(string)
		count[id]++
		bodies[id], _ = e.Values["body"].(string)
	}
	return count, bodies
}

// JetStreamMessages reads every message of a JetStream stream of events: per Nats-Msg-Id,
// how many messages, and each one's data.
func JetStreamMessages(t testing.TB, url, name string) (count map[string]int, bodies map[string]string) {
	t.Helper()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	s, err := js.Stream(ctx, name)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	count, bodies = map[string]int{}, map[string]string{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		require.NoError(t, err)
		id := m.Header.Get(nats.MsgIdHdr)
		count[id]++
		bodies[id] = string(m.Data)
	}
	return count, bodies
}
