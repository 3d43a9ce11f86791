package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The reference sections of docs/ are generated from the code: every
// command's flags and every COUPONLINK_* variable on
// docs/configuration.md, every metric every process registers on
// docs/monitoring.md. TestReference writes them with -update and
// otherwise fails when the pages differ from what the code says.

// regenerate is the command that rewrites the generated sections.
const regenerate = "go test ./cmd/couponlink -run TestReference -update"

// repoRoot is the repository's root, seen from this package's directory.
const repoRoot = "../.."

var update = flag.Bool("update", false, "rewrite the generated sections of docs/ (flags, metrics) from the code: "+regenerate)

// TestReference: the flags section of docs/configuration.md and the
// metrics section of docs/monitoring.md are what the code generates.
func TestReference(t *testing.T) {
	cleanEnv(t)
	for _, s := range []struct {
		page, section string
		generate      func(t *testing.T) string
	}{
		{"configuration.md", "flags", flagsReference},
		{"monitoring.md", "metrics", metricsReference},
	} {
		checkSection(t, filepath.Join(repoRoot, "docs", s.page), s.section, s.generate(t))
	}
}

// cleanEnv unsets every COUPONLINK_* variable for the test, so that the
// defaults it documents are the code's, never the environment's.
func cleanEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "COUPONLINK_") {
			require.NoError(t, os.Unsetenv(name))
			t.Cleanup(func() { os.Setenv(name, value) })
		}
	}
}

// checkSection compares the section named section of page (between
// "<!-- generated: section -->" and "<!-- end generated: section -->")
// with body, or with -update writes body there.
func checkSection(t *testing.T, page, section, body string) {
	t.Helper()
	b, err := os.ReadFile(page)
	require.NoError(t, err)
	start, end := "<!-- generated: "+section+" -->\n", "<!-- end generated: "+section+" -->"
	before, rest, ok := strings.Cut(string(b), start)
	require.True(t, ok, "%s: no %q line", page, strings.TrimSpace(start))
	have, after, ok := strings.Cut(rest, end)
	require.True(t, ok, "%s: no %q line", page, end)
	want := "<!-- Generated from the code by `" + regenerate + "`: edit the code, not this section. -->\n\n" + body + "\n"
	if *update {
		require.NoError(t, os.WriteFile(page, []byte(before+start+want+end+after), 0o644))
		return
	}
	if have != want {
		line, h, w := firstDifference(have, want)
		t.Errorf("%s: the generated %s section differs from the code at its line %d:\n  page: %q\n  code: %q\nregenerate it with `%s`",
			page, section, line, h, w, regenerate)
	}
}

// firstDifference is the first line (from 1) where a and b differ, and
// that line of each ("" past its end).
func firstDifference(a, b string) (int, string, string) {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; ; i++ {
		x, y := lineOf(al, i), lineOf(bl, i)
		if x != y || i >= len(al) || i >= len(bl) {
			return i + 1, x, y
		}
	}
}

func lineOf(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return ""
}

// cell is s as the text of a Markdown table's cell: pipes escaped, no
// line breaks, no HTML.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;").Replace(s)
}
