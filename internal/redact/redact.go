// Package redact hides the secrets of couponlink's settings wherever they
// would be shown: -h, logs, errors, /status and metrics. String is the one
// function every command uses for every setting that can hold a secret: a
// MySQL DSN (-dsn, -binlog-dsn, a primaries list's DSNs), a URL (the
// webhook URL, the event sinks, a Redis URL), a list of them. Tokens and
// the webhook secret are never shown at all (settings.Flags.EnvSecret).
package redact

import (
	"net/url"
	"regexp"
	"strings"

	"github.com/couponlink/couponlink/internal/mysqlconn"
)

// Mask is what a secret is replaced by.
const Mask = "xxxxx"

// secretParams are the URL query parameters that hold a secret.
var secretParams = regexp.MustCompile(secretParam + `[^&;#\s]*`)

// secretParam is a secret query parameter's "?name=".
const secretParam = `(?i)([?&;](?:password|passwd|pass|pwd|secret|token|key|auth|sig|signature|access_token|api_key|apikey|creds?|nkey|jwt)=)`

// userinfo is a URL's "user:password@" when url.Parse cannot read it.
var userinfo = regexp.MustCompile(`(//[^/:@\s]*:).*@`)

// String is v with its secrets replaced by Mask: a URL's password and its
// secret query parameters (password=, token=, ...); a MySQL DSN's
// password; each of a comma-separated list of URLs. A value it cannot
// read is hidden in full rather than shown, when it may hold a password.
func String(v string) string {
	if v == "" {
		return v
	}
	if strings.Count(v, "://") > 1 && strings.Contains(v, ",") {
		parts := strings.Split(v, ",")
		for i, p := range parts {
			parts[i] = String(p)
		}
		return strings.Join(parts, ",")
	}
	if strings.Contains(v, "://") {
		return redactURL(v)
	}
	if hostPort.MatchString(v) {
		return v // an address (-redis host:port), no password
	}
	return secretParams.ReplaceAllString(mysqlconn.Redact(v), "${1}"+Mask)
}

// hostPort is an address without credentials: host:port, [v6]:port.
var hostPort = regexp.MustCompile(`^[^:@()/\s]*:[0-9]+$|^\[[0-9a-fA-F:.]+\]:[0-9]+$`)

func redactURL(v string) string {
	u, err := url.Parse(strings.TrimSpace(v))
	if err != nil {
		v = userinfo.ReplaceAllString(v, "${1}"+Mask+"@")
		return secretParams.ReplaceAllString(v, "${1}"+Mask)
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Mask)
		}
	}
	out := u.String()
	out = strings.Replace(out, ":"+url.QueryEscape(Mask)+"@", ":"+Mask+"@", 1)
	return secretParams.ReplaceAllString(out, "${1}"+Mask)
}
