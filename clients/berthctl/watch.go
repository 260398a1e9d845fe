package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/encoding/protojson"

	berth "github.com/berth-io/berth/clients/go"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// watch prints binding events as they happen: aligned lines in table
// format, one JSON object per line with -o json, YAML documents with -o
// yaml. It ends without error when interrupted.
func (c *cli) watch(fs *pflag.FlagSet) runFunc {
	from := fs.Int64("from-revision", 0, "print the events after `revision` R; 0 prints every current binding first")
	return func(ctx context.Context, args []string) error {
		return c.connect(ctx, noArgs(args), func(p printer, client *berth.Client) error {
			if !p.structured() {
				watchHeader(c.stdout)
			}
			err := client.WatchBindings(ctx, *from, func(ev *berthv1.BindingEvent) error {
				return c.printEvent(p, ev)
			})
			var ce *berth.CompactedError
			switch {
			case errors.Is(err, context.Canceled) && ctx.Err() != nil:
				return nil // interrupted: the normal way to stop watching
			case errors.As(err, &ce):
				return fmt.Errorf("%w; watch again with --from-revision 0 to start from the current bindings", ce)
			}
			return err
		})
	}
}

func (c *cli) printEvent(p printer, ev *berthv1.BindingEvent) error {
	switch p.format {
	case formatJSON:
		raw, err := protojson.Marshal(ev)
		if err != nil {
			return err
		}
		var line bytes.Buffer
		if err := json.Compact(&line, raw); err != nil {
			return err
		}
		line.WriteByte('\n')
		_, err = c.stdout.Write(line.Bytes())
		return err
	case formatYAML:
		if _, err := fmt.Fprintln(c.stdout, "---"); err != nil {
			return err
		}
		return p.object(ev)
	}
	watchLine(c.stdout, ev)
	return nil
}
