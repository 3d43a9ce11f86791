// Package defaults fills what a component's config may leave out and
// every component defaults the same way.
package defaults

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// LogMetricsClock sets each of a config's logger, metrics registerer and
// clock that is nil to its default: slog.Default(), a registry of its own
// (the metrics are kept, not served: a caller that serves them passes its
// registerer) and time.Now.
func LogMetricsClock(log **slog.Logger, reg *prometheus.Registerer, now *func() time.Time) {
	if *log == nil {
		*log = slog.Default()
	}
	if *reg == nil {
		*reg = prometheus.NewRegistry()
	}
	if *now == nil {
		*now = time.Now
	}
}
