package streams

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/webhook"
)

// Redis stream entry fields: consumers dedupe on FieldID.
const (
	FieldID   = "id"   // the event id, the body's id
	FieldType = "type" // the event type, the body's type
	FieldBody = "body" // the stored JSON body, as the webhook receiver gets it
)

// RedisStream appends events to a Redis stream: one XADD per event with
// MAXLEN ~ (the stream keeps about the newest MaxLen entries), the fields
// id, type and body. Consumers read with XREADGROUP and dedupe on id: an
// event sent again (a cdc killed between the XADD and saving its
// position) is a second entry with the same id.
type RedisStream struct {
	name   string
	stream string
	maxLen int64
	rdb    *redis.Client
	format webhook.Format // CloudEvents: the body field holds the structured envelope
}

// NewRedisStream returns a sink named name appending to the stream key on
// rdb, trimmed to about maxLen entries (0: never trimmed). The sink owns
// rdb: Close closes it.
func NewRedisStream(name string, rdb *redis.Client, stream string, maxLen int64) *RedisStream {
	return &RedisStream{name: name, stream: stream, maxLen: maxLen, rdb: rdb}
}

// Name is the sink's name.
func (s *RedisStream) Name() string { return s.name }

// Send appends msgs in order, in one pipeline. It returns how many, from
// the first, Redis acknowledged. In CloudEvents format the body field is
// the structured envelope (a body that is not JSON is refused).
func (s *RedisStream) Send(ctx context.Context, msgs []webhook.Message) (int, error) {
	bodies := make([][]byte, 0, len(msgs))
	var refused error
	for _, m := range msgs {
		body := m.Body
		if s.format.CloudEvents {
			env, _, err := webhook.CloudEvent(m, s.format.Source)
			if err != nil {
				refused = webhook.Refused(err) // after those before it
				break
			}
			body = env
		}
		bodies = append(bodies, body)
	}
	msgs = msgs[:len(bodies)]
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(msgs))
	for i, m := range msgs {
		cmds[i] = pipe.XAdd(ctx, &redis.XAddArgs{Stream: s.stream, MaxLen: s.maxLen, Approx: s.maxLen > 0,
			Values: []any{FieldID, m.ID, FieldType, m.Type, FieldBody, bodies[i]}})
	}
	if len(msgs) == 0 {
		return 0, refused
	}
	_, execErr := pipe.Exec(ctx) // each command carries its own error, but
	for i, c := range cmds {
		err := c.Err()
		if err == nil && c.Val() == "" {
			// not sent: the pipeline failed before its commands (a
			// connection the server refused at AUTH) and left them without
			// an error of their own
			err = cmp.Or(execErr, errors.New("no reply"))
		}
		if err != nil {
			return i, fmt.Errorf("XADD %s (event %s): %w", s.stream, msgs[i].ID, err)
		}
	}
	return len(msgs), refused
}

// Close closes the Redis client.
func (s *RedisStream) Close() error { return s.rdb.Close() }
