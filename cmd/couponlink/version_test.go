package main

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// couponlink version prints the module's version, the VCS revision and
// time of the build, and the Go version; what the binary does not know is
// "unknown".
func TestVersion(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/couponlink/couponlink", Version: "v1.4.0"},
		Settings: []debug.BuildSetting{{Key: "-compiler", Value: "gc"}, {Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "626cad3f00"}, {Key: "vcs.time", Value: "2026-12-01T20:00:00Z"}, {Key: "vcs.modified", Value: "false"}}}
	assert.Equal(t, "couponlink version v1.4.0\nrevision 626cad3f00\ntime     2026-12-01T20:00:00Z\ngo       go1.26.0\n", versionText(info))

	info.Settings[4].Value = "true"
	assert.Contains(t, versionText(info), "revision 626cad3f00 (modified: built with uncommitted changes)\n")

	info.Main.Version, info.Settings = "", nil
	assert.Equal(t, "couponlink version (devel)\nrevision unknown (not built from a checkout with its VCS information)\n"+
		"time     unknown\ngo       go1.26.0\n", versionText(info))
	assert.Equal(t, "couponlink version unknown (the binary has no build information)\n", versionText(nil))

	code, out, errs := cli(t, "version")
	assert.Equal(t, 0, code, errs)
	assert.Regexp(t, `^couponlink version \S+\nrevision .+\ntime .+\ngo +go1\.`, out)
	code, _, errs = cli(t, "version", "extra")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "unexpected arguments: extra")
}
