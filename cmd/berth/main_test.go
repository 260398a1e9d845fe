package main

import (
	"os"
	"testing"
)

// runMainEnv makes the test binary act as berth itself, so tests can run
// real berth processes without a separate build.
const runMainEnv = "BERTH_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}
