package inventory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// The cdc_process table: where each cdc process serves its /metrics, so
// that the API finds the leading cdc's gauges without a setting.

// MetricsURL is the URL of the /metrics a listener at addr (as
// net.Listener.Addr().String() says it) serves, reachable from another
// process: an unspecified host (":9464", "[::]:9464") is this host's name.
func MetricsURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("metrics address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if host, err = os.Hostname(); err != nil {
			return "", fmt.Errorf("metrics address %q: this host's name: %w", addr, err)
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/metrics", nil
}

// RecordCDCProcess writes where the cdc process named leader (following
// checkpoint) serves its metrics.
func RecordCDCProcess(ctx context.Context, db *sql.DB, leader, checkpoint, metricsURL string) error {
	_, err := db.ExecContext(ctx, `INSERT INTO cdc_process (leader, checkpoint, metrics_url, started_at) VALUES (?, ?, ?, ?)
		ON DUPLICATE KEY UPDATE checkpoint = VALUES(checkpoint), metrics_url = VALUES(metrics_url), started_at = VALUES(started_at)`,
		leader, checkpoint, metricsURL, time.Now().UTC())
	if err != nil {
		return fmt.Errorf("record the cdc's metrics address: %w", err)
	}
	return nil
}

// LeaderMetricsURL is the /metrics URL the checkpoint's leading cdc
// recorded; "" when it recorded none (a cdc older than the table, one
// without -metrics-addr, or no cdc yet).
func LeaderMetricsURL(ctx context.Context, db *sql.DB, checkpoint string) (string, error) {
	var url string
	err := db.QueryRowContext(ctx, `SELECT p.metrics_url FROM cdc_checkpoint c JOIN cdc_process p ON p.leader = c.leader
		WHERE c.name = ?`, checkpoint).Scan(&url)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the cdc's metrics address: %w", err)
	}
	return url, nil
}
