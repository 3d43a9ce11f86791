package api_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestImportsStayLight: package api imports the standard library only,
// and package client the standard library and api, so that a program
// using the client links none of the server's MySQL, Redis or metrics
// packages.
func TestImportsStayLight(t *testing.T) {
	for dir, allowed := range map[string][]string{".": nil, "../client": {"github.com/couponlink/couponlink/api"}} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range file.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				first, _, _ := strings.Cut(path, "/")
				if strings.Contains(first, ".") && !slices.Contains(allowed, path) {
					t.Errorf("%s imports %s: only the standard library (and, in client, package api) may be imported", f, path)
				}
			}
		}
	}
}
