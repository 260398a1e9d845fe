package replica

import (
	"strings"
	"testing"

	"go.uber.org/zap"
)

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7070": true, "[::1]:7070": true, "localhost:7070": true, "127.0.0.2:1": true,
		"0.0.0.0:7070": false, ":7070": false, "10.0.0.1:7070": false, "berth.example:7070": false, "garbage": false,
	} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestPlaintextOffLoopback: refused without Insecure, for the gRPC and the
// metrics address alike; allowed with it; loopback needs nothing.
func TestPlaintextOffLoopback(t *testing.T) {
	cases := []struct {
		listen, metrics string
		insecure, ok    bool
	}{
		{"127.0.0.1:0", "127.0.0.1:0", false, true},
		{"0.0.0.0:0", "-", false, false},
		{"127.0.0.1:0", ":0", false, false},
		{"0.0.0.0:0", ":0", true, true},
	}
	for _, c := range cases {
		sec, err := loadSecurity(Config{Listen: c.listen, MetricsListen: c.metrics, Logger: zap.NewNop(), Security: Security{Insecure: c.insecure}})
		if (err == nil) != c.ok {
			t.Errorf("%s, %s, insecure %v: err %v, want ok %v", c.listen, c.metrics, c.insecure, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "--insecure") {
			t.Errorf("refusal does not say how to proceed: %v", err)
		}
		if sec != nil {
			if sec.auth != nil {
				t.Errorf("%s: an interceptor with nothing to check or audit", c.listen)
			}
			sec.close()
		}
	}
}
