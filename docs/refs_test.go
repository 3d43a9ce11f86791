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

// TestCitedDocumentsExist: every Markdown document the repository's code,
// docs and deploy files name (`see docs/design.md`, `RUNBOOK.md`) is a file
// of the repository, so a newcomer who clones it can follow each citation;
// a path that climbs out of the repository fails.
func TestCitedDocumentsExist(t *testing.T) {
	cited := regexp.MustCompile(`(?:^|[^\w./:-])((?:\.{1,2}/)*[\w.-]+(?:/[\w.-]+)*\.md)\b`)
	names := map[string]bool{} // every .md file's base name
	var files []string
	require.NoError(t, filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "bin"):
			return filepath.SkipDir
		case d.IsDir():
			return nil
		case strings.HasSuffix(path, ".md"):
			names[d.Name()] = true
		}
		if textFile.MatchString(d.Name()) {
			files = append(files, path)
		}
		return nil
	}))
	notes := numberedNotes(t)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, l := range strings.Split(string(b), "\n") {
			for _, m := range cited.FindAllStringSubmatch(l, -1) {
				assert.True(t, citedExists(f, m[1], names), "%s:%d cites %s, which the repository does not hold: %s", f, i+1, m[1], l)
			}
			for _, m := range citedNote.FindAllStringSubmatch(l, -1) {
				assert.True(t, notes[m[2]] && m[1] == "docs/binlog.md", "%s:%d cites note %s #%s; notes are cited as docs/binlog.md #n, n one of its notes: %s", f, i+1, m[1], m[2], l)
			}
		}
	}
}

// citedNote is a document's note cited by number, as docs/binlog.md and
// a hash and the number (a document ending in NOTES counts too, and fails).
var citedNote = regexp.MustCompile(`([\w./-]*(?:\.md|NOTES)) #(\d+)\b`)

// numberedNotes are the numbers of docs/binlog.md's notes (### 3. ...).
func numberedNotes(t *testing.T) map[string]bool {
	b, err := os.ReadFile(filepath.Join(root, "docs", "binlog.md"))
	require.NoError(t, err)
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^### (\d+)\. `).FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = true
	}
	require.NotEmpty(t, out)
	return out
}

// textFile is a file whose lines may cite a document.
var textFile = regexp.MustCompile(`\.(go|md|ya?ml|sh|sql|service|json)$|^(Makefile|Dockerfile)$`)

// citedExists: ref, named in file f, is a file of the repository — from f's
// folder, from the root, or (a bare name) anywhere in it — never above the root.
func citedExists(f, ref string, names map[string]bool) bool {
	ref = strings.TrimPrefix(ref, "RUNBOOK_BASE/") // the runbook links' documented placeholder (docs/monitoring.md)
	for _, p := range []string{filepath.Join(filepath.Dir(f), ref), filepath.Join(root, ref)} {
		rel, err := filepath.Rel(root, p)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return !strings.Contains(ref, "/") && names[ref]
}
