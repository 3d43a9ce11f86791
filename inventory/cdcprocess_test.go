package inventory_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/inventory"
)

// A listener's address becomes a URL another process can reach: an
// unspecified host is this host's name.
func TestMetricsURL(t *testing.T) {
	host, err := os.Hostname()
	require.NoError(t, err)
	for addr, want := range map[string]string{
		"127.0.0.1:9464": "http://127.0.0.1:9464/metrics",
		"[::1]:9464":     "http://[::1]:9464/metrics",
		":9464":          "http://" + host + ":9464/metrics",
		"[::]:9464":      "http://" + host + ":9464/metrics",
		"0.0.0.0:9464":   "http://" + host + ":9464/metrics",
	} {
		got, err := inventory.MetricsURL(addr)
		require.NoError(t, err, addr)
		assert.Equal(t, want, got, addr)
	}
	_, err = inventory.MetricsURL("no port")
	assert.Error(t, err)
}
