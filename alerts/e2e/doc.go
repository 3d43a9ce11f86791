// Package e2e is the end-to-end test of couponlink's alert rules against a
// real Prometheus server (Debian's prometheus package): it builds the
// couponlink binary, runs `couponlink cdc` and `couponlink reconcile` on a
// fresh test database, lets Prometheus scrape them with alerts/couponlink.rules.yml
// (with every `for:` shortened), induces drift and a cdc stop, and waits for
// the alerts to fire in /api/v1/alerts and to resolve again.
package e2e
