package streams

import (
	"context"
	"net/url"
	"strings"

	"github.com/couponlink/couponlink/webhook"
)

// redacted hides its URL's password in a sink's send errors: they are
// logged and kept for the status (event_sink_position.last_error).
type redacted struct {
	webhook.Sink
	secret string
}

// withoutSecret wraps s when u carries a password.
func withoutSecret(s webhook.Sink, u *url.URL) webhook.Sink {
	if p, ok := u.User.Password(); ok && p != "" {
		return redacted{Sink: s, secret: p}
	}
	return s
}

func (s redacted) Send(ctx context.Context, msgs []webhook.Message) (int, error) {
	n, err := s.Sink.Send(ctx, msgs)
	if err != nil && strings.Contains(err.Error(), s.secret) {
		err = &scrubbed{err: err, msg: strings.ReplaceAll(err.Error(), s.secret, "xxxxx")}
	}
	return n, err
}

// scrubbed is an error whose message has the password replaced; it still
// unwraps to the error (webhook.IsRefused looks through it).
type scrubbed struct {
	err error
	msg string
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }
