package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/pflag"
)

func (c *cli) version(fs *pflag.FlagSet) runFunc {
	return func(_ context.Context, args []string) error {
		if err := wantArgs(args); err != nil {
			return err
		}
		info, ok := debug.ReadBuildInfo()
		if !ok {
			fmt.Fprintln(c.stdout, "berthctl (no build information)")
			return nil
		}
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		fmt.Fprintf(c.stdout, "berthctl %s\n", orNone(info.Main.Version))
		fmt.Fprintf(c.stdout, "  module:   %s\n", orNone(info.Main.Path))
		fmt.Fprintf(c.stdout, "  go:       %s\n", info.GoVersion)
		fmt.Fprintf(c.stdout, "  platform: %s/%s\n", runtime.GOOS, runtime.GOARCH)
		if rev := settings["vcs.revision"]; rev != "" {
			if settings["vcs.modified"] == "true" {
				rev += " (modified)"
			}
			fmt.Fprintf(c.stdout, "  commit:   %s\n", rev)
			fmt.Fprintf(c.stdout, "  time:     %s\n", orNone(settings["vcs.time"]))
		}
		return nil
	}
}
