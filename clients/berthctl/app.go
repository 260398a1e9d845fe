package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

// runFunc runs a command with its positional arguments, after its flags
// have been parsed.
type runFunc func(ctx context.Context, args []string) error

// command is one entry of the command table, from which the cobra tree is
// built.
type command struct {
	name    string // e.g. "node add"
	args    string // synopsis of the positional arguments
	summary string
	// streaming commands run until interrupted; --timeout does not apply.
	streaming bool
	// setup registers the command's flags and returns what runs it.
	setup func(c *cli, fs *pflag.FlagSet) runFunc
	// names, if set, lists the stored objects the NAME argument completes to.
	names nameLister
}

func commands() []command {
	return []command{
		{name: "node add", args: "NAME [flags] | -f FILE", summary: "Create or replace nodes", setup: (*cli).nodeAdd},
		{name: "node list", args: "[-l SELECTOR]", summary: "List nodes", setup: (*cli).nodeList},
		{name: "node get", args: "NAME", summary: "Show a node and what its pods request", setup: (*cli).nodeGet, names: nodeNames},
		{name: "node delete", args: "NAME", summary: "Delete a node", setup: (*cli).nodeDelete, names: nodeNames},
		{name: "node renew", args: "NAME", summary: "Renew a node's lease (keep it reachable)", setup: (*cli).nodeRenew, names: nodeNames},
		{name: "pod submit", args: "NAME [flags] | -f FILE", summary: "Submit pods for scheduling", setup: (*cli).podSubmit},
		{name: "pod list", args: "[-n NS | -A] [-l SELECTOR]", summary: "List pods", setup: (*cli).podList},
		{name: "pod get", args: "NAME", summary: "Show a pod and why it is not scheduled", setup: (*cli).podGet, names: podNames},
		{name: "pod delete", args: "NAME | -l SELECTOR | --all", summary: "Delete a pod, or the pods of a namespace that match", setup: (*cli).podDelete, names: podNames},
		{name: "pod confirm", args: "NAME", summary: "Report that a bound pod started (RUNNING)", setup: (*cli).podConfirm, names: podNames},
		{name: "pod reject", args: "NAME", summary: "Report that the node could not start a pod", setup: (*cli).podReject, names: podNames},
		{name: "pod complete", args: "NAME --phase P", summary: "Report that a pod finished", setup: (*cli).podComplete, names: podNames},
		{name: "podgroup apply", args: "NAME [flags] | -f FILE", summary: "Create or replace pod groups (gangs)", setup: (*cli).podGroupApply},
		{name: "podgroup list", args: "[-n NS | -A]", summary: "List pod groups", setup: (*cli).podGroupList},
		{name: "podgroup get", args: "NAME", summary: "Show a pod group and how many members are bound", setup: (*cli).podGroupGet, names: podGroupNames},
		{name: "podgroup delete", args: "NAME", summary: "Delete a pod group", setup: (*cli).podGroupDelete, names: podGroupNames},
		{name: "explain", args: "NAME | -f FILE", summary: "Dry-run a pod: every node's verdict and scores", setup: (*cli).explain, names: podNames},
		{name: "watch", summary: "Print binding events until interrupted", streaming: true, setup: (*cli).watch},
		{name: "version", summary: "Print the version berthctl was built from", setup: (*cli).version},
	}
}

// Summaries of the commands that only group others.
var groupSummaries = map[string]string{
	"node":     "Manage nodes",
	"pod":      "Manage pods",
	"podgroup": "Manage pod groups",
}

func (c *cli) run(ctx context.Context, args []string) int {
	root := c.rootCommand()
	root.SetArgs(doubleDashLongFlags(root, args))
	return c.fail(root.ExecuteContext(ctx))
}

// rootCommand builds the cobra tree from the command table.
func (c *cli) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "berthctl [global flags] COMMAND [flags]",
		Short:         "Command-line client of the Berth scheduler",
		SilenceErrors: true, // fail reports them, with the exit code
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE:          c.unknownCommand,

		SuggestionsMinimumDistance: 2,
	}
	root.SetIn(c.stdin)
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	// Help goes to stderr, as it did before cobra: stdout carries only
	// what a command produces (and completion scripts).
	root.SetHelpFunc(c.help)
	root.SetUsageFunc(func(cmd *cobra.Command) error { c.help(cmd, nil); return nil })
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		msg := err.Error()
		// The wording of the flag package, which scripts may match.
		for _, p := range []string{"unknown flag: ", "unknown shorthand flag: "} {
			if rest, ok := strings.CutPrefix(msg, p); ok {
				msg = "flag provided but not defined: " + rest
			}
		}
		return usageError{msg}
	})
	c.global.register(root.PersistentFlags(), c.getenv)
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(
		[]string{formatTable, formatWide, formatJSON, formatYAML}, cobra.ShellCompDirectiveNoFileComp))

	groups := map[string]*cobra.Command{}
	for _, spec := range commands() {
		parent := root
		words := strings.Fields(spec.name)
		for _, w := range words[:len(words)-1] {
			g, ok := groups[w]
			if !ok {
				g = &cobra.Command{Use: w + " COMMAND", Short: groupSummaries[w], Args: cobra.ArbitraryArgs, RunE: c.unknownCommand,
					SuggestionsMinimumDistance: 2}
				groups[w] = g
				parent.AddCommand(g)
			}
			parent = g
		}
		parent.AddCommand(c.leafCommand(spec, words[len(words)-1]))
	}
	return root
}

// doubleDashLongFlags rewrites "-cpu 4" as "--cpu 4": the flag package
// berthctl used before cobra took long flags after one dash, and scripts may
// still write them so. Only names of long flags are rewritten, so "-n ns"
// and "-A" keep their meaning; nothing after "--" is touched.
func doubleDashLongFlags(root *cobra.Command, args []string) []string {
	long := map[string]bool{}
	var collect func(*cobra.Command)
	collect = func(cmd *cobra.Command) {
		cmd.LocalFlags().VisitAll(func(f *pflag.Flag) { long[f.Name] = true })
		cmd.PersistentFlags().VisitAll(func(f *pflag.Flag) { long[f.Name] = true })
		for _, sub := range cmd.Commands() {
			collect(sub)
		}
	}
	collect(root)
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if len(name) > 1 && strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && long[name] {
			a = "-" + a
		}
		out = append(out, a)
	}
	return out
}

// leafCommand is the cobra command that runs spec.
func (c *cli) leafCommand(spec command, word string) *cobra.Command {
	use := word
	if spec.args != "" {
		use += " " + spec.args
	}
	cmd := &cobra.Command{Use: use, Short: spec.summary, Args: cobra.ArbitraryArgs}
	runCmd := spec.setup(c, cmd.Flags())
	if spec.names != nil {
		cmd.ValidArgsFunction = c.completeNames(spec.names)
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		if !spec.streaming && c.global.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.global.timeout)
			defer cancel()
		}
		return runCmd(ctx, args)
	}
	return cmd
}

// unknownCommand runs for a command that only groups others: without a
// subcommand it shows the usage; with a wrong one it suggests near names.
func (c *cli) unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		c.help(cmd, nil)
		return errUsageShown
	}
	msg := fmt.Sprintf("unknown command %q", strings.TrimPrefix(cmd.CommandPath()+" "+strings.Join(args, " "), cmd.Root().Name()+" "))
	if suggestions := cmd.SuggestionsFor(args[0]); len(suggestions) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(suggestions, "\n\t")
	}
	return usageError{msg}
}

// help writes the usage of cmd: every command below it, with its
// arguments, its own flags and the global ones.
func (c *cli) help(cmd *cobra.Command, _ []string) {
	w := c.stderr
	fmt.Fprintf(w, "usage: %s\n\n%s.\n", cmd.UseLine(), cmd.Short)
	if cmd.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\ncommands:\n")
		tw := newTable(w)
		var walk func(*cobra.Command)
		walk = func(sub *cobra.Command) {
			for _, s := range sub.Commands() {
				if !s.IsAvailableCommand() {
					continue
				}
				if s.Name() == "completion" { // one line, not one per shell
					fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.Name(), "bash|zsh|fish|powershell", "Print a shell completion script")
					continue
				}
				if s.HasAvailableSubCommands() {
					walk(s)
					continue
				}
				path := strings.TrimPrefix(s.CommandPath(), cmd.Root().Name()+" ")
				_, args, _ := strings.Cut(s.Use, " ")
				fmt.Fprintf(tw, "  %s\t%s\t%s\n", path, args, s.Short)
			}
		}
		walk(cmd)
		tw.Flush()
	}
	if cmd.HasAvailableLocalFlags() && cmd.HasParent() {
		fmt.Fprintf(w, "\nflags:\n%s", cmd.LocalFlags().FlagUsages())
	}
	global := cmd.InheritedFlags()
	if !cmd.HasParent() {
		global = cmd.PersistentFlags()
	}
	fmt.Fprintf(w, "\nglobal flags (also accepted after the command):\n%s", global.FlagUsages())
	if cmd.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\nRun 'berthctl COMMAND -h' for the flags of a command.\n")
	}
}

// usageError is a mistake on the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// errUsageShown fails a command line whose usage was already printed.
var errUsageShown = errors.New("usage shown")

// fail reports err, if any, on stderr and returns the exit code for it.
func (c *cli) fail(err error) int {
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errUsageShown):
		return exitUsage
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
