package auth

import (
	"testing"

	"go.uber.org/goleak"
)

// Pollers run goroutines; Close must end them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
