package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	berth "github.com/berth-io/berth/clients/go"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command failed
	exitUsage = 2 // the command line was wrong
)

// run is the whole CLI: it parses args, runs one command and returns the
// exit code. Tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &cli{stdin: os.Stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv}
	return c.run(ctx, args)
}

// cli holds what a command needs from its environment.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	global         globals
}

// globals are the flags every command accepts, before or after its name.
type globals struct {
	addr    string
	output  string
	timeout time.Duration
	sec     secureFlags // TLS and token (issue 10)
}

func (g *globals) register(fs *flag.FlagSet) {
	// The current values are the defaults, so a flag given before the
	// command name survives the parsing of the command's own flags.
	fs.StringVar(&g.addr, "addr", g.addr, "server `address` (env BERTH_ADDR)")
	fs.StringVar(&g.output, "o", g.output, "output `format`: table, json or yaml")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "time limit of the command, 0 for none (watch has none)")
	g.sec.register(fs)
}

// runFunc runs a command with its positional arguments, after its flags
// have been parsed.
type runFunc func(ctx context.Context, args []string) error

// command is one entry of the command table.
type command struct {
	name    string // e.g. "node add"
	args    string // synopsis of the positional arguments
	summary string
	// streaming commands run until interrupted; --timeout does not apply.
	streaming bool
	// setup registers the command's flags and returns what runs it.
	setup func(c *cli, fs *flag.FlagSet) runFunc
}

func commands() []command {
	return []command{
		{name: "node add", args: "NAME [flags] | -f FILE", summary: "Create or replace nodes", setup: (*cli).nodeAdd},
		{name: "node list", summary: "List nodes", setup: (*cli).nodeList},
		{name: "node get", args: "NAME", summary: "Show a node and what its pods request", setup: (*cli).nodeGet},
		{name: "node delete", args: "NAME", summary: "Delete a node", setup: (*cli).nodeDelete},
		{name: "node renew", args: "NAME", summary: "Renew a node's lease (keep it reachable)", setup: (*cli).nodeRenew},
		{name: "pod submit", args: "NAME [flags] | -f FILE", summary: "Submit pods for scheduling", setup: (*cli).podSubmit},
		{name: "pod list", summary: "List pods", setup: (*cli).podList},
		{name: "pod get", args: "NAME", summary: "Show a pod and why it is not scheduled", setup: (*cli).podGet},
		{name: "pod delete", args: "NAME", summary: "Delete a pod", setup: (*cli).podDelete},
		{name: "pod confirm", args: "NAME", summary: "Report that a bound pod started (RUNNING)", setup: (*cli).podConfirm},
		{name: "pod reject", args: "NAME", summary: "Report that the node could not start a pod", setup: (*cli).podReject},
		{name: "pod complete", args: "NAME --phase P", summary: "Report that a pod finished", setup: (*cli).podComplete},
		{name: "podgroup apply", args: "NAME [flags] | -f FILE", summary: "Create or replace pod groups (gangs)", setup: (*cli).podGroupApply},
		{name: "podgroup list", summary: "List pod groups", setup: (*cli).podGroupList},
		{name: "podgroup get", args: "NAME", summary: "Show a pod group and how many members are bound", setup: (*cli).podGroupGet},
		{name: "podgroup delete", args: "NAME", summary: "Delete a pod group", setup: (*cli).podGroupDelete},
		{name: "explain", args: "NAME | -f FILE", summary: "Dry-run a pod: every node's verdict and scores", setup: (*cli).explain},
		{name: "watch", summary: "Print binding events until interrupted", streaming: true, setup: (*cli).watch},
	}
}

// lookup finds the command named by the first one or two words of args.
func lookup(args []string) (command, []string, bool) {
	for _, cmd := range commands() {
		words := strings.Fields(cmd.name)
		if len(args) >= len(words) && strings.Join(args[:len(words)], " ") == cmd.name {
			return cmd, args[len(words):], true
		}
	}
	return command{}, nil, false
}

func (c *cli) run(ctx context.Context, args []string) int {
	c.global = globals{addr: berth.DefaultAddr, output: formatTable, timeout: 10 * time.Second}
	if addr := c.getenv("BERTH_ADDR"); addr != "" {
		c.global.addr = addr
	}
	c.global.sec.fromEnv(c.getenv)
	top := flag.NewFlagSet("berthctl", flag.ContinueOnError)
	top.SetOutput(c.stderr)
	c.global.register(top)
	top.Usage = func() { c.usage(top) }
	if err := top.Parse(args); err != nil {
		return parseFailure(err)
	}
	cmd, rest, ok := lookup(top.Args())
	if !ok {
		if top.NArg() == 1 && top.Arg(0) == "help" {
			c.usage(top)
			return exitOK
		}
		if top.NArg() > 0 {
			fmt.Fprintf(c.stderr, "berthctl: unknown command %q\n\n", strings.Join(top.Args(), " "))
		}
		c.usage(top)
		return exitUsage
	}

	fs := flag.NewFlagSet("berthctl "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	c.global.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: berthctl %s %s\n\n%s.\n\nflags:\n", cmd.name, cmd.args, cmd.summary)
		fs.PrintDefaults()
	}
	runCmd := cmd.setup(c, fs)
	positional, err := parseArgs(fs, rest)
	if err != nil {
		return parseFailure(err)
	}
	if !cmd.streaming && c.global.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.global.timeout)
		defer cancel()
	}
	return c.fail(runCmd(ctx, positional))
}

func (c *cli) usage(top *flag.FlagSet) {
	fmt.Fprintf(c.stderr, "usage: berthctl [global flags] COMMAND [flags]\n\ncommands:\n")
	for _, cmd := range commands() {
		fmt.Fprintf(c.stderr, "  %-16s %-26s %s\n", cmd.name, cmd.args, cmd.summary)
	}
	fmt.Fprintf(c.stderr, "\nglobal flags (also accepted after the command):\n")
	top.PrintDefaults()
	fmt.Fprintf(c.stderr, "\nRun 'berthctl COMMAND -h' for the flags of a command.\n")
}

// usageError is a mistake on the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// parseFailure is the exit code after a flag parsing error, which the flag
// package has already reported along with the usage.
func parseFailure(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// fail reports err, if any, on stderr and returns the exit code for it.
func (c *cli) fail(err error) int {
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(c.stderr, "berthctl: %s\nRun with -h for usage.\n", ue.msg)
		return exitUsage
	}
	printError(c.stderr, err)
	return exitError
}

// printError writes an error with its gRPC code and, for invalid requests,
// which fields were wrong. Context added around a status error ("node n1:
// ...") is kept in front of the code.
func printError(w io.Writer, err error) {
	var se interface {
		error
		GRPCStatus() *status.Status
	}
	if !errors.As(err, &se) {
		fmt.Fprintf(w, "error: %v\n", err)
		return
	}
	st := se.GRPCStatus()
	if prefix, ok := strings.CutSuffix(err.Error(), se.Error()); ok {
		fmt.Fprintf(w, "error: %s%s: %s\n", prefix, st.Code(), st.Message())
	} else {
		fmt.Fprintf(w, "error: %v (%s)\n", err, st.Code())
	}
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fmt.Fprintf(w, "  %s: %s\n", v.GetField(), v.GetDescription())
			}
		}
	}
}

// dial connects to the server named by --addr.
func (c *cli) dial(ctx context.Context) (*berth.Client, error) {
	opts, err := c.global.sec.options()
	if err != nil {
		return nil, err
	}
	return berth.Dial(ctx, c.global.addr, opts...)
}

// printer returns the printer of -o, on stdout.
func (c *cli) printer() (printer, error) { return newPrinter(c.global.output, c.stdout) }

// connect is every command's preamble. It checks -o, then the rest of the
// command line with check (positional arguments, flag values, -f files; nil
// for nothing more), so that a wrong command line fails before any
// connection is made; then it dials --addr and runs fn with the printer and
// the client, which it closes after.
func (c *cli) connect(ctx context.Context, check func() error, fn func(p printer, client *berth.Client) error) error {
	p, err := c.printer()
	if err != nil {
		return err
	}
	if check != nil {
		if err := check(); err != nil {
			return err
		}
	}
	client, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	return fn(p, client)
}

// noArgs is the check of a command that takes no positional arguments.
func noArgs(args []string) func() error {
	return func() error { return wantArgs(args) }
}

// onNamed runs a command that acts on one object named by its NAME
// argument: fn gets the printer, the client and the name.
func (c *cli) onNamed(ctx context.Context, args []string, fn func(p printer, client *berth.Client, name string) error) error {
	return c.connect(ctx, func() error { return wantArgs(args, "NAME") },
		func(p printer, client *berth.Client) error { return fn(p, client, args[0]) })
}

// applyEach applies items in order with apply, which returns the response
// and the line table output prints for it, and stops at the first failure,
// naming the item when there are several. With -o json or yaml the
// responses of those applied are printed at the end, failure or not: one
// object for one item, else a list.
func applyEach[T interface {
	proto.Message
	GetName() string
}, R proto.Message](c *cli, p printer, kind string, items []T, apply func(T) (R, string, error)) error {
	var done []R
	var applyErr error
	for i, item := range items {
		resp, line, err := apply(item)
		if err != nil {
			applyErr = err
			if len(items) > 1 { // say which one failed
				applyErr = fmt.Errorf("%s %d of %d (%q): %w", kind, i+1, len(items), item.GetName(), err)
			}
			break
		}
		if !p.structured() {
			fmt.Fprintln(c.stdout, line)
		}
		done = append(done, resp)
	}
	var err error
	if p.structured() && len(done) > 0 {
		if len(items) == 1 {
			err = p.object(done[0])
		} else {
			err = list(p, done)
		}
	}
	if applyErr != nil {
		return applyErr
	}
	return err
}

// collect gathers the items of a paged listing, at most limit of them
// (0: all), stopping at the first error.
func collect[T any](all iter.Seq2[T, error], limit int) ([]T, error) {
	var items []T
	for item, err := range all {
		if err != nil {
			return nil, err
		}
		items = append(items, item)
		if limit > 0 && len(items) == limit {
			break
		}
	}
	return items, nil
}

// wantArgs checks the number of positional arguments.
func wantArgs(args []string, names ...string) error {
	if len(args) != len(names) {
		if len(names) == 0 {
			return usageErrorf("unexpected arguments: %s", strings.Join(args, " "))
		}
		return usageErrorf("want %s, got %d argument(s)", strings.Join(names, " "), len(args))
	}
	return nil
}
