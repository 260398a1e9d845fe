// Package secure tests the replica's transport security and access
// control end to end: a real replica with an embedded etcd, real TLS on
// loopback, certificates made here.
package secure

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	berth "github.com/berth-io/berth/clients/go"
	"github.com/berth-io/berth/replica"
	"github.com/berth-io/berth/server/auth"
)

const policyYAML = `grants:
  - {identity: admin, role: admin}
  - {identity: token-admin, role: admin}
  - {identity: orch-a, role: orchestrator, namespaces: [a]}
  - {identity: obs-a, role: observer, namespaces: [a]}
`

const adminToken = "s3cret-admin-token"

// env is a secured replica and the material to reach it.
type env struct {
	dir  string
	ca   *auth.CA
	srv  *replica.Replica
	addr string
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	// Through a rename, so the replica's poller never reads a half.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// issueClient writes <name>.crt/.key signed by ca.
func issueClient(t *testing.T, ca *auth.CA, dir, name string, req auth.CertRequest) {
	t.Helper()
	if req.CommonName == "" {
		req.CommonName = name
	}
	req.Client = true
	certPEM, keyPEM, err := ca.Issue(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.WriteKeyPair(dir, name, certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
}

func issueServer(t *testing.T, ca *auth.CA, dir string) {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(auth.CertRequest{CommonName: "berth", Server: true, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.WriteKeyPair(dir, "server", certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
}

// startSecure makes the CA, the server's and clients' certificates, a
// tokens file and the policy, and starts a replica with mutual TLS.
func startSecure(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	ca, err := auth.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteCA(dir); err != nil {
		t.Fatal(err)
	}
	issueServer(t, ca, dir)
	for _, name := range []string{"admin", "orch-a", "obs-a", "stranger"} {
		issueClient(t, ca, dir, name, auth.CertRequest{})
	}
	issueClient(t, ca, dir, "expired", auth.CertRequest{CommonName: "admin",
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	other, err := auth.NewCA("other CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	issueClient(t, other, dir, "foreign", auth.CertRequest{CommonName: "admin"})
	writeFile(t, filepath.Join(dir, "tokens"), []byte("# test tokens\n"+auth.HashToken(adminToken)+" token-admin\n"))
	writeFile(t, filepath.Join(dir, "policy.yaml"), []byte(policyYAML))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := replica.Start(ctx, replica.Config{
		Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"),
		Logger: zaptest.NewLogger(t),
		Security: replica.Security{
			TLS: auth.TLSFiles{
				Cert: filepath.Join(dir, "server.crt"), Key: filepath.Join(dir, "server.key"),
				ClientCA: filepath.Join(dir, "ca.crt"),
			},
			TokensFile: filepath.Join(dir, "tokens"), PolicyFile: filepath.Join(dir, "policy.yaml"),
			PollInterval: 20 * time.Millisecond,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	if err := srv.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	return &env{dir: dir, ca: ca, srv: srv, addr: srv.Addr()}
}

// caller is one way of presenting (or not) credentials.
type caller struct {
	name  string
	cert  string // file stem in env.dir; "" for none
	token string
	plain bool // no TLS at all
}

// conn dials the replica as c; each call makes its own connection so a
// handshake happens with the files as they are now.
func (e *env) conn(t *testing.T, c caller) *grpc.ClientConn {
	t.Helper()
	conn, err := e.dial(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// dial is conn for goroutines other than the test's: the caller closes it.
func (e *env) dial(c caller) (*grpc.ClientConn, error) {
	var opts []grpc.DialOption
	if c.plain {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	} else {
		files := berth.TLSFiles{CACert: filepath.Join(e.dir, "ca.crt")}
		if c.cert != "" {
			files.Cert, files.Key = filepath.Join(e.dir, c.cert+".crt"), filepath.Join(e.dir, c.cert+".key")
		}
		cfg, err := files.TLSConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	}
	if c.token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(tokenCreds(c.token)))
	}
	return grpc.NewClient(e.addr, opts...)
}

type tokenCreds string

func (t tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}
func (tokenCreds) RequireTransportSecurity() bool { return false }

// serverSerial is the serial of the certificate the server presents to a
// new handshake now.
func (e *env) serverSerial(t *testing.T) string {
	t.Helper()
	pem, err := os.ReadFile(filepath.Join(e.dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	c, err := tls.Dial("tcp", e.addr, &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func tctx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
