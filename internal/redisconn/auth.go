package redisconn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/internal/redact"
)

// credentialSettings names where the credentials come from, for the
// error of a server that refuses them (never their values).
const credentialSettings = "-redis-username [COUPONLINK_REDIS_USERNAME] and -redis-password [COUPONLINK_REDIS_PASSWORD, " +
	"or its file COUPONLINK_REDIS_PASSWORD_FILE], or the user:password of a redis:// URL in -redis [COUPONLINK_REDIS_ADDR]"

// ErrAuth is what Open's error wraps when Redis refuses the credentials.
var ErrAuth = errors.New("Redis refuses couponlink's credentials")

// checkAuth pings rdb once: a refusal of the credentials is an error
// naming their settings; any other failure (Redis not reachable yet) is
// left to the client's later commands.
func checkAuth(rdb redis.UniversalClient, password string, dial time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*max(dial, time.Second))
	defer cancel()
	err := rdb.Ping(ctx).Err()
	if !IsAuthError(err) {
		return nil
	}
	msg := redact.Text(err.Error())
	if password != "" {
		msg = strings.ReplaceAll(msg, password, redact.Mask)
	}
	return fmt.Errorf("%w (%s): check %s", ErrAuth, msg, credentialSettings)
}

// IsAuthError says whether err is Redis refusing a connection's
// credentials: a wrong user or password (WRONGPASS, or "invalid password"
// before Redis 6), or none given to a server that wants one (NOAUTH).
func IsAuthError(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOAUTH") || strings.Contains(msg, "invalid password")
}
