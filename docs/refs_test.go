package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunbookURLsResolve: every alert's runbook_url names a section of
// docs/monitoring.md that exists, so an alert never points at a page or an
// anchor the repository does not have.
func TestRunbookURLsResolve(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "alerts", "couponlink.rules.yml"))
	require.NoError(t, err)
	urls := regexp.MustCompile(`runbook_url:\s*"([^"]*)"`).FindAllStringSubmatch(string(b), -1)
	require.NotEmpty(t, urls)
	have := anchors(t, filepath.Join(root, "docs", "monitoring.md"))
	for _, m := range urls {
		page, anchor, _ := strings.Cut(m[1], "#")
		assert.Equal(t, "docs/monitoring.md", page, m[1])
		assert.True(t, have[anchor], "runbook_url %s: no such section in docs/monitoring.md", m[1])
	}
}

// TestSystemdDocumentationExists: the units' Documentation= lines name
// pages of docs/ (installed under /usr/share/doc/couponlink/docs/).
func TestSystemdDocumentationExists(t *testing.T) {
	units, err := filepath.Glob(filepath.Join(root, "deploy", "systemd", "*.service"))
	require.NoError(t, err)
	require.NotEmpty(t, units)
	const installed = "file:/usr/share/doc/couponlink/"
	for _, u := range units {
		b, err := os.ReadFile(u)
		require.NoError(t, err)
		for _, l := range strings.Split(string(b), "\n") {
			doc, ok := strings.CutPrefix(l, "Documentation=")
			if !ok {
				continue
			}
			for _, ref := range strings.Fields(doc) {
				rel, ok := strings.CutPrefix(ref, installed)
				if assert.True(t, ok, "%s: %s is not a page of docs/ as installed", u, ref) {
					assert.FileExists(t, filepath.Join(root, filepath.FromSlash(rel)), u)
				}
			}
		}
	}
}

// TestNoCitationOutsideTheRepository: the pages cite the design notes in
// docs/, never a document the repository does not contain.
func TestNoCitationOutsideTheRepository(t *testing.T) {
	outside := regexp.MustCompile(`\.\./shared/|\bDESIGN\.md\b|BINLOG-NOTES|README-monitoring`)
	for _, p := range pages(t) {
		b, err := os.ReadFile(filepath.Join(root, p))
		require.NoError(t, err)
		for i, l := range strings.Split(string(b), "\n") {
			assert.False(t, outside.MatchString(l), "%s:%d cites a document outside the repository: %s", p, i+1, l)
		}
	}
}
