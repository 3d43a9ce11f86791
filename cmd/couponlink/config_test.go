package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A log level slog does not know stops every command that logs at its
// start (usage error, exit 2), from the flag or from the environment; it is
// not silently info. A malformed DSN makes a command that got past its
// flags fail at once (exit 1).
func TestBadLogLevel(t *testing.T) {
	badDSN := "nobody@tcp(127.0.0.1:1"
	for _, cmd := range []string{"api", "cdc", "expire", "reconcile"} {
		t.Run(cmd, func(t *testing.T) {
			code, _, errs := cli(t, cmd, "-dsn", badDSN, "-log-level", "loud")
			assert.Equal(t, 2, code, errs)
			assert.Contains(t, errs, `invalid value "loud" for flag -log-level: not a log level (debug, info, warn, error)`)

			t.Setenv("COUPONLINK_LOG_LEVEL", "verbose")
			code, _, errs = cli(t, cmd, "-dsn", badDSN)
			assert.Equal(t, 2, code, errs)
			assert.Contains(t, errs, `COUPONLINK_LOG_LEVEL="verbose" is not a log level (debug, info, warn, error)`)

			t.Setenv("COUPONLINK_LOG_LEVEL", "WARN")
			code, _, errs = cli(t, cmd, "-dsn", badDSN, "-log-level", "debug")
			assert.Equal(t, 1, code, "a good level: the command starts; %s", errs)
		})
	}
}

// -rel-threshold is a number (flag or environment) and a share of the
// truth: above 0 (0 would be the default) and at most 1. reconcile -once
// ends with 2 on it, before it opens anything.
func TestReconcileRelThreshold(t *testing.T) {
	once := []string{"reconcile", "-once", "-dsn", "nobody@tcp(127.0.0.1:1"}
	for _, bad := range []string{"0", "-0.5", "1.5", "NaN"} {
		code, _, errs := cli(t, append(once, "-rel-threshold", bad)...)
		assert.Equal(t, 2, code, errs)
		assert.Contains(t, errs, "-rel-threshold must be a share of the truth above 0 and at most 1 (0.05 = 5%), got "+bad)
	}
	code, _, errs := cli(t, append(once, "-rel-threshold", "lots")...)
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, `invalid value "lots" for flag -rel-threshold`)

	t.Setenv("COUPONLINK_RECONCILE_REL", "5%")
	code, _, errs = cli(t, once...)
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, `COUPONLINK_RECONCILE_REL="5%" is not a number`)

	t.Setenv("COUPONLINK_RECONCILE_REL", "1")
	code, _, errs = cli(t, once...)
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, "parse MySQL DSN", "a good threshold: the pass goes on to the database")
}

// -event-format is native or cloudevents (flag or environment); anything
// else is a usage error before the cdc opens anything.
func TestEventFormat(t *testing.T) {
	badDSN := "nobody@tcp(127.0.0.1:1"
	code, _, errs := cli(t, "cdc", "-dsn", badDSN, "-event-format", "xml")
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, `-event-format (COUPONLINK_EVENT_FORMAT): event format "xml": not native or cloudevents`)

	t.Setenv("COUPONLINK_EVENT_FORMAT", "CloudEvents")
	code, _, errs = cli(t, "cdc", "-dsn", badDSN)
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, `event format "CloudEvents"`)

	t.Setenv("COUPONLINK_EVENT_FORMAT", "cloudevents")
	code, _, errs = cli(t, "cdc", "-dsn", badDSN)
	assert.Equal(t, 1, code, "a good format: the cdc starts; %s", errs)
}
