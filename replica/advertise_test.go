package replica

import (
	"net"
	"os"
	"testing"
)

func TestAdvertiseAddrReplacesAWildcardHost(t *testing.T) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		t.Skip("no host name")
	}
	tests := []struct {
		listen string
		want   string
	}{
		{"127.0.0.1:7070", "127.0.0.1:7070"},
		{"10.0.0.5:7070", "10.0.0.5:7070"},
		{"0.0.0.0:7070", net.JoinHostPort(host, "7070")},
		{"[::]:7070", net.JoinHostPort(host, "7070")},
	}
	for _, tt := range tests {
		addr, err := net.ResolveTCPAddr("tcp", tt.listen)
		if err != nil {
			t.Fatal(err)
		}
		if got := advertiseAddr(addr); got != tt.want {
			t.Errorf("advertiseAddr(%s) = %q, want %q", tt.listen, got, tt.want)
		}
	}
}
