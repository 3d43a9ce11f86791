package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/couponlink/couponlink/internal/settings"
)

func versionFlags(stderr io.Writer) *settings.Flags {
	return newFlags("version", "Prints the build of this binary: the module's version, the VCS revision and time it was built from, and the Go version.", stderr)
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if err := versionFlags(stderr).Parse(args); err != nil {
		return err
	}
	info, _ := debug.ReadBuildInfo() // nil when the binary has none
	_, err := io.WriteString(stdout, versionText(info))
	return err
}

// versionText is what couponlink version prints of info (nil: a binary
// without build information).
func versionText(info *debug.BuildInfo) string {
	if info == nil {
		return "couponlink version unknown (the binary has no build information)\n"
	}
	version := info.Main.Version
	if version == "" {
		version = "(devel)"
	}
	vcs := map[string]string{}
	for _, s := range info.Settings {
		if strings.HasPrefix(s.Key, "vcs.") {
			vcs[s.Key] = s.Value
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "couponlink version %s\n", version)
	rev, when := vcs["vcs.revision"], vcs["vcs.time"]
	if rev == "" {
		rev, when = "unknown (not built from a checkout with its VCS information)", "unknown"
	} else if vcs["vcs.modified"] == "true" {
		rev += " (modified: built with uncommitted changes)"
	}
	if when == "" {
		when = "unknown"
	}
	fmt.Fprintf(&b, "revision %s\ntime     %s\ngo       %s\n", rev, when, info.GoVersion)
	return b.String()
}
