package redact

import (
	"regexp"
	"strings"
)

// embeddedURL is a URL inside free text (an error message, a log line): a
// scheme, "://", then everything up to a blank or a quote.
var embeddedURL = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>` + "`" + `]+`)

// embeddedDSN is a MySQL DSN's "user:password@net(" inside free text.
var embeddedDSN = regexp.MustCompile(`([^\s:@/"'(=]+):[^\s@"']*@((?:tcp|unix|tcp6)\()`)

// Text is s, a free text that may quote settings (an error a library
// built around a URL or a DSN, a log line), with every secret replaced by
// Mask: each URL's password and secret query parameters, each DSN's
// password, each "token=..." and the like. It is what every error goes
// through before it is logged, stored or served; a text without "://",
// "@" or "=" is returned as is, at once.
func Text(s string) string {
	if !strings.Contains(s, "://") && !strings.Contains(s, "@") && !strings.Contains(s, "=") {
		return s
	}
	s = embeddedURL.ReplaceAllStringFunc(s, String) // String: a list of URLs (-redis's) each
	s = embeddedDSN.ReplaceAllString(s, "${1}:"+Mask+"@${2}")
	return textParams.ReplaceAllString(s, "${1}"+Mask)
}

// textParams are secretParams in free text, whose value also ends at a
// quote (a URL quoted in an error).
var textParams = regexp.MustCompile(secretParam + `[^&;#\s"'<>` + "`" + `]*`)

// Error is err with its message through Text; it still unwraps to err (so
// errors.Is and errors.As see through it). nil stays nil, and an error
// whose message holds no secret is returned as is.
func Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if clean := Text(msg); clean != msg {
		return &redacted{err: err, msg: clean}
	}
	return err
}

// redacted is an error whose message had its secrets replaced.
type redacted struct {
	err error
	msg string
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }
