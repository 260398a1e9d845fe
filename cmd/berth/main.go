// Command berth is the Berth scheduling service (berth serve) and its
// tools (berth bench, berth load).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `berth: a gRPC scheduling service with kube-scheduler semantics

Usage:
  berth serve [flags]   run a replica (embedded etcd unless --etcd-endpoints)
  berth bench [flags]   measure end-to-end scheduling throughput
  berth load [flags]    measure one replica at scale: memory, throughput, restart times
  berth etcd [flags]    run one etcd member in-process (for a cluster without an etcd binary)
  berth version         print the version, VCS revision and Go version (also --version)
  berth probe [flags]   exit 0 if a replica's gRPC health service says SERVING (container healthchecks)
  berth certs [flags]   make a CA, a server certificate and client certificates for mutual TLS
  berth help            show this text

Run "berth <command> -h" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// newFlagSet is the flag set of a subcommand: parse errors and -h go to
// stderr, -h printing usage and then the flags.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	return fs
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], stderr)
	case "bench":
		err = runBench(ctx, args[1:], stdout, stderr)
	case "load":
		err = runLoad(ctx, args[1:], stdout, stderr)
	case "etcd":
		err = etcdMember(ctx, args[1:], stderr)
	case "version", "--version", "-version":
		printVersion(stdout)
		return 0
	case "probe":
		err = runProbe(ctx, args[1:], stdout, stderr)
	case "certs":
		err = runCerts(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "berth: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0 // the flag set printed the usage asked for
	}
	if err != nil {
		fmt.Fprintf(stderr, "berth %s: %v\n", args[0], err)
		return 1
	}
	return 0
}
