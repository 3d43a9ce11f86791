// Package console is the operator console: static HTML, CSS and
// JavaScript modules embedded in the binary, served by `couponlink api`
// at /console/. Every number on its pages comes from the API's JSON
// routes, called with the token the operator types (kept in the tab's
// sessionStorage, sent as an Authorization header).
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// Prefix is where the console is served.
const Prefix = "/console/"

// Handler serves the console's files under Prefix; /console redirects
// there. The pages may not be framed, and load scripts and styles from
// the console's own origin only.
func Handler() http.Handler {
	var fileServer http.Handler
	if files, err := fs.Sub(static, "static"); err != nil { // the embedded tree always has static/
		fileServer = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "the console's files are missing from this build: "+err.Error(), http.StatusInternalServerError)
		})
	} else {
		fileServer = http.StripPrefix(Prefix, http.FileServerFS(files))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/console" {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the console's files are read with GET", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		fileServer.ServeHTTP(w, r)
	})
}

// Mount serves the console beside api: /console and /console/... go to
// the console, every other path to api.
func Mount(api http.Handler) http.Handler {
	c := Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/console" || strings.HasPrefix(r.URL.Path, Prefix) {
			c.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}
