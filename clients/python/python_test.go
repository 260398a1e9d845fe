// Package python holds the Python client; this test drives a real replica
// from it, so `go test ./...` (and `make test`) covers the Python side too.
package python_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-io/berth/replica"
	"github.com/berth-io/berth/replica/replicatest"
	"github.com/berth-io/berth/server/auth"
)

// python is Debian's interpreter: python3-grpcio and python3-protobuf are
// installed for it, not for a pyenv or virtualenv python on PATH.
const python = "/usr/bin/python3"

// requirePython skips without Debian's python3 gRPC packages, except in CI,
// where `make test` installs them and their absence is a failure.
func requirePython(t *testing.T) {
	t.Helper()
	out, err := exec.Command(python, "-c", "import grpc, google.protobuf").CombinedOutput()
	if err == nil {
		return
	}
	msg := "python3 with grpc and protobuf is not available (" + err.Error() + ": " + string(out) +
		"); `make test` installs python3-grpcio and python3-protobuf, or apt-get install them"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func runPython(t *testing.T, ctx context.Context, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s %v:\n%s", python, args, out)
	if err != nil {
		t.Fatalf("%s %v: %v", python, args, err)
	}
}

// The Python client's own tests, against in-process fakes.
func TestPythonUnit(t *testing.T) {
	requirePython(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	runPython(t, ctx, "-m", "unittest", "discover", "-s", "tests", "-t", ".", "-p", "test_*.py")
}

// The Python client against a real replica with an embedded etcd.
func TestPythonE2E(t *testing.T) {
	requirePython(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv, _ := replicatest.Start(t)
	runPython(t, ctx, "tests/e2e.py", "--addr", srv.Addr())
}

// The Python client over TLS against a replica that demands an identity:
// once with a client certificate, once with a bearer token.
func TestPythonE2ETLS(t *testing.T) {
	requirePython(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca, err := auth.NewCA("berth-test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile := write("ca.pem", ca.CertPEM())
	issue := func(name string, req auth.CertRequest) (cert, key string) {
		t.Helper()
		c, k, err := ca.Issue(req)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".pem", c), write(name+"-key.pem", k)
	}
	srvCert, srvKey := issue("server", auth.CertRequest{CommonName: "berth", IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true})
	cliCert, cliKey := issue("client", auth.CertRequest{CommonName: "orchestrator", Client: true})
	const token = "py-e2e-token"
	tokens := write("tokens", []byte(auth.HashToken(token)+" py-orchestrator\n"))

	srv, _ := replicatest.Start(t, func(c *replica.Config) {
		c.Security = replica.Security{
			TLS:        auth.TLSFiles{Cert: srvCert, Key: srvKey, ClientCA: caFile},
			TokensFile: tokens,
		}
	})
	t.Run("client certificate", func(t *testing.T) {
		runPython(t, ctx, "tests/e2e.py", "--addr", srv.Addr(), "--ca-cert", caFile, "--cert", cliCert, "--key", cliKey)
	})
	t.Run("bearer token", func(t *testing.T) {
		runPython(t, ctx, "tests/e2e.py", "--addr", srv.Addr(), "--ca-cert", caFile, "--token", token)
	})
	t.Run("neither is refused", func(t *testing.T) {
		runPython(t, ctx, "tests/e2e.py", "--addr", srv.Addr(), "--ca-cert", caFile, "--token", "wrong", "--expect-refused")
	})
}
