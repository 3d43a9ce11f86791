package docs_test

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// root is the repository's root, seen from this package's directory.
const root = ".."

var (
	fence      = regexp.MustCompile("^\\s*(```|~~~)")
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	mdLink     = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	inlineLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	emphasis   = regexp.MustCompile(`[*_]{1,3}([^*_]+)[*_]{1,3}`)
)

// link is one link of a page, with where it was found.
type link struct {
	page   string // path relative to the root
	line   int
	target string
}

// pages are the documents the checker reads: README.md, docs/*.md and the
// other folders' own READMEs and runbook.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, docs)
	out := []string{"README.md", "deploy/README.md", "alerts/RUNBOOK.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		require.NoError(t, err)
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// proseLines are a page's lines outside fenced code, with code spans
// blanked: links in code are examples, not links.
func proseLines(text string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(text, "\n") {
		if fence.MatchString(l) {
			in = !in
			out = append(out, "")
			continue
		}
		if in {
			out = append(out, "")
			continue
		}
		out = append(out, codeSpan.ReplaceAllString(l, "``"))
	}
	return out
}

func linksOf(t *testing.T, page string) []link {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, page))
	require.NoError(t, err)
	var out []link
	for i, l := range proseLines(string(b)) {
		for _, m := range mdLink.FindAllStringSubmatch(l, -1) {
			out = append(out, link{page: page, line: i + 1, target: m[1]})
		}
	}
	return out
}

// slug is GitHub's anchor of a heading: the rendered text in lower case,
// without punctuation and symbols, spaces as hyphens.
func slug(text string) string {
	text = inlineLink.ReplaceAllString(text, "$1")
	text = strings.ReplaceAll(text, "`", "")
	text = emphasis.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.M, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the anchors a Markdown file defines: one per heading (a
// repeated one gets -1, -2, ...) and each <a id="..."> or <a name="...">.
func anchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	out, seen := map[string]bool{}, map[string]int{}
	for _, l := range proseLines(string(b)) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// checkExternal says what is wrong with a link that names a scheme: only
// http(s) links to public sites may leave the repository.
func checkExternal(u *url.URL) string {
	if u.Scheme != "http" && u.Scheme != "https" {
		return "a " + u.Scheme + ": link leaves the repository"
	}
	host := u.Hostname()
	switch {
	case host == "localhost", strings.HasPrefix(host, "127."), host == "0.0.0.0", strings.HasSuffix(host, ".local"),
		strings.HasSuffix(host, ".internal"), strings.HasSuffix(host, ".example"), strings.HasSuffix(host, ".invalid"):
		return "a link to a host that is not a public site"
	case host == "github.com" && strings.HasPrefix(strings.ToLower(u.Path), "/couponlink/couponlink"):
		return "a placeholder link to the repository's own copy: link the file by its relative path"
	}
	return ""
}

// checkRelative says what is wrong with a link inside the repository.
func checkRelative(t *testing.T, l link, u *url.URL, cache map[string]map[string]bool) string {
	t.Helper()
	file := filepath.Join(root, l.page)
	if u.Path != "" {
		if strings.HasPrefix(u.Path, "/") {
			return "an absolute path: write it relative to " + l.page
		}
		file = filepath.Join(root, filepath.Dir(l.page), filepath.FromSlash(u.Path))
		rel, err := filepath.Rel(root, file)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return "a path outside the repository"
		}
		if _, err := os.Stat(file); err != nil {
			return "no such file: " + filepath.ToSlash(rel)
		}
	}
	if u.Fragment == "" {
		return ""
	}
	if !strings.HasSuffix(file, ".md") {
		return "an anchor into a file that is not Markdown"
	}
	if cache[file] == nil {
		cache[file] = anchors(t, file)
	}
	if !cache[file][u.Fragment] {
		return "no heading or anchor #" + u.Fragment + " in " + filepath.Base(file)
	}
	return ""
}

// TestLinksResolve: every relative link of README.md and docs/*.md names a
// file of the repository (and, with #anchor, a heading of it), and every
// other link is an http(s) link to a public site.
func TestLinksResolve(t *testing.T) {
	cache := map[string]map[string]bool{}
	var bad []string
	n, all := 0, pages(t)
	for _, p := range all {
		for _, l := range linksOf(t, p) {
			n++
			u, err := url.Parse(l.target)
			why := ""
			switch {
			case err != nil:
				why = "not a URL: " + err.Error()
			case u.Scheme != "":
				why = checkExternal(u)
			default:
				why = checkRelative(t, l, u, cache)
			}
			if why != "" {
				bad = append(bad, l.page+":"+strconv.Itoa(l.line)+": ("+l.target+") "+why)
			}
		}
	}
	sort.Strings(bad)
	t.Logf("%d links in %d pages, %d broken", n, len(all), len(bad))
	assert.Empty(t, bad, "broken links:\n%s", strings.Join(bad, "\n"))
	assert.Greater(t, n, 100, "the checker found too few links: is it reading the pages?")
}
