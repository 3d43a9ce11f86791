// Package alerts holds couponlink's Prometheus rules (couponlink.rules.yml),
// their promtool unit tests and the runbook. Its Go test checks that every
// metric name the rules and the Grafana dashboard (deploy/grafana) use is one
// the code registers.
package alerts
