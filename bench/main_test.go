package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// testChildEnv makes the test binary a stand-in child for the process
// tests (server_test.go): "sleep" blocks until killed; "group" starts a
// sleeping grandchild in its group, writes the grandchild's pid to stdout,
// and blocks; "parent" starts a sleeping child the bench way, writes its
// pid and exits without stopping it, as a crashed bench would; "stubborn"
// ignores SIGTERM, then writes its own pid and blocks; "pid" writes its
// own pid and blocks.
const testChildEnv = "BERTH_BENCH_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(testChildEnv) {
	case "":
		goleak.VerifyTestMain(m)
	case "sleep":
		select {}
	case "pid":
		fmt.Println(os.Getpid())
		select {}
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println(os.Getpid())
		select {}
	case "group":
		// The bench's child leads its group; what it starts stays in the
		// group unless it asks otherwise (as an external etcd might).
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), testChildEnv+"=sleep")
		exitOn(cmd.Start())
		fmt.Println(cmd.Process.Pid)
		select {}
	case "parent":
		p, err := startServerProcess(context.Background(), ServerCommand{Path: os.Args[0], Env: []string{testChildEnv + "=sleep"}}, nil, os.DevNull)
		exitOn(err)
		fmt.Println(p.pid())
		os.Exit(0)
	}
}

func exitOn(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
}
