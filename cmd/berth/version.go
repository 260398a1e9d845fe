package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// buildInfo describes this binary from what the Go toolchain stamped in it:
// the module version (a tag for go install of a release, "(devel)" for a
// build in a checkout), the VCS revision and time when built from one, and
// the Go version.
func buildInfo() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "berth: no build information in this binary\n"
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	var b strings.Builder
	fmt.Fprintf(&b, "berth %s\n", bi.Main.Version)
	if rev := settings["vcs.revision"]; rev != "" {
		if settings["vcs.modified"] == "true" {
			rev += " (modified)"
		}
		fmt.Fprintf(&b, "  revision: %s\n", rev)
	}
	if t := settings["vcs.time"]; t != "" {
		fmt.Fprintf(&b, "  commit time: %s\n", t)
	}
	fmt.Fprintf(&b, "  go: %s %s/%s\n", bi.GoVersion, settings["GOOS"], settings["GOARCH"])
	return b.String()
}

func printVersion(stdout io.Writer) {
	fmt.Fprint(stdout, buildInfo())
}
