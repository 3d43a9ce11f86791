// Package docs holds couponlink's documentation pages (the *.md files
// beside this one). Its tests keep them true: every relative link and
// anchor of README.md and the pages resolves, no link leaves the
// repository except to public web sites, and the README's local demo runs
// against the real binary.
package docs
