// Package e2e is the end-to-end test of couponlink's alert rules against a
// real Prometheus server (Debian's prometheus package): it builds the
// couponlink binary, runs `couponlink cdc` and `couponlink reconcile` on a
// fresh test database and lets Prometheus scrape them with
// alerts/couponlink.rules.yml. TestAlertBudget keeps the rules as shipped
// at the recommended 10 s intervals and asserts each fault's time to firing
// within the alert budget of docs/monitoring.md;
// TestAlertsFireAndResolveWithRealPrometheus shortens every `for:` to see
// the slow alerts fire and resolve again in seconds.
// TestDashboardPanelsReturnSeries also runs `couponlink api` and proves that
// every panel of deploy/grafana/couponlink.json answers a series.
package e2e
