package api_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/couponlink/couponlink/internal/testenv"
)

// TestImportsStayLight: package api imports the standard library only,
// and package client the standard library and api, so that a program
// using the client links none of the server's MySQL, Redis or metrics
// packages.
func TestImportsStayLight(t *testing.T) {
	for dir, allowed := range map[string][]string{".": nil, "../client": {"github.com/couponlink/couponlink/api"}} {
		for f, paths := range testenv.Imports(t, dir) {
			for _, path := range paths {
				first, _, _ := strings.Cut(path, "/")
				if strings.Contains(first, ".") && !slices.Contains(allowed, path) {
					t.Errorf("%s imports %s: only the standard library (and, in client, package api) may be imported", f, path)
				}
			}
		}
	}
}
