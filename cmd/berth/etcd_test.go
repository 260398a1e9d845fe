package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	berth "github.com/berth-io/berth/clients/go"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/replica"
	"github.com/berth-io/berth/store"
)

// testPKI is a CA made for one test, and the files of a server and a
// client certificate it signed.
type testPKI struct {
	caFile, serverCert, serverKey, clientCert, clientKey string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "berth test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	issue := func(name string, serial int64, usage x509.ExtKeyUsage) (certFile, keyFile string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".crt", "CERTIFICATE", der), write(name+".key", "PRIVATE KEY", keyDER)
	}
	p := testPKI{caFile: write("ca.crt", "CERTIFICATE", caDER)}
	p.serverCert, p.serverKey = issue("etcd-server", 2, x509.ExtKeyUsageServerAuth)
	// The client's CN is no etcd user, so only the password can
	// authenticate it.
	p.clientCert, p.clientKey = issue("berth-client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

func freeLoopback(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startSecureEtcd runs an in-process etcd that requires client
// certificates signed by the test CA, with auth enabled for user root.
func startSecureEtcd(t *testing.T, pki testPKI, rootPassword string) string {
	t.Helper()
	ec := embed.NewConfig()
	ec.Name, ec.Dir = "secure", t.TempDir()
	clientURL := url.URL{Scheme: "https", Host: freeLoopback(t)}
	peerURL := url.URL{Scheme: "http", Host: freeLoopback(t)}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.ClientTLSInfo.CertFile, ec.ClientTLSInfo.KeyFile = pki.serverCert, pki.serverKey
	ec.ClientTLSInfo.TrustedCAFile, ec.ClientTLSInfo.ClientCertAuth = pki.caFile, true
	store.EmbeddedConfig{}.ApplyTo(ec)
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// etcd checks the password with bcrypt for every token it hands out.
	// At the default cost (10), under -race beside another package's tests
	// on 2 cores, a check outlasted the replica's 3 s request timeout, so
	// every token request was cancelled and the replica never synced. The
	// minimum cost (4) tests the same path 64 times cheaper.
	ec.BcryptCost = 4
	e, err := embed.StartEtcd(ec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatal(err)
	case <-time.After(60 * time.Second):
		t.Fatal("etcd not ready after 60s")
	}

	var f etcdClientFlags
	f.caCert, f.cert, f.key = pki.caFile, pki.clientCert, pki.clientKey
	tlsCfg, err := f.tlsConfig([]string{clientURL.String()})
	if err != nil {
		t.Fatal(err)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL.String()}, TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.UserAdd(ctx, "root", rootPassword); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	return clientURL.String()
}

// TestServeExternalEtcdTLSAuth runs berth serve, through its flags,
// against an etcd that requires TLS client certificates and a password
// (given in the environment), and checks that a pod binds. A wrong
// password stops it at start.
func TestServeExternalEtcdTLSAuth(t *testing.T) {
	pki := newTestPKI(t)
	endpoint := startSecureEtcd(t, pki, "s3cret")
	addr := freeLoopback(t)
	args := func(extra ...string) []string {
		return append([]string{"--listen", addr, "--metrics-listen", "-", "--etcd-endpoints", endpoint,
			"--etcd-cacert", pki.caFile, "--etcd-cert", pki.clientCert, "--etcd-key", pki.clientKey,
			"--etcd-username", "root", "--etcd-dial-timeout", "3s", "--etcd-request-timeout", "3s", "--log-level", "error"}, extra...)
	}

	t.Setenv(etcdPasswordEnv, "wrong")
	var stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err := serve(ctx, args(), &stderr)
	cancel()
	if err == nil || !strings.Contains(err.Error(), "authentication failed") {
		t.Fatalf("serve with a wrong password: %v, want an authentication failure", err)
	}

	t.Setenv(etcdPasswordEnv, "s3cret")
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(ctx, args(), &stderr) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v\n%s", err, stderr.String())
		}
	}()

	c, err := berth.Dial(context.Background(), addr, berth.WithMaxAttempts(10), berth.WithBackoff(50*time.Millisecond, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	callCtx, cancelCall := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancelCall()
	if _, _, err := c.UpsertNode(callCtx, &berthv1.Node{Name: "n1", Allocatable: map[string]int64{"cpu": 1000, "memory": 1 << 30, "pods": 10}}); err != nil {
		t.Fatalf("upsert node: %v\n%s", err, stderr.String())
	}
	resp, err := c.SchedulerService().Schedule(callCtx, &berthv1.ScheduleRequest{Pod: &berthv1.Pod{
		Namespace: "tls", Name: "p1",
		Containers: []*berthv1.Container{{Name: "c", Image: "app:1", Requests: map[string]int64{"cpu": 100}}},
	}})
	if err != nil {
		t.Fatalf("schedule: %v\n%s", err, stderr.String())
	}
	if got := resp.GetPod(); got.GetNodeName() != "n1" || got.GetStatus().GetPhase() != berthv1.PodPhase_POD_PHASE_BOUND {
		t.Fatalf("pod is %v on %q, want BOUND on n1", got.GetStatus().GetPhase(), got.GetNodeName())
	}
}

func TestEtcdClientFlags(t *testing.T) {
	pki := newTestPKI(t)
	env := func(v string) func(string) string { return func(string) string { return v } }
	for _, tc := range []struct {
		name    string
		f       etcdClientFlags
		eps     []string
		env     string
		wantErr string
		check   func(*testing.T, replica.Config)
	}{
		{name: "plain", eps: []string{"http://127.0.0.1:2379"}, check: func(t *testing.T, c replica.Config) {
			if c.Store.TLS != nil || c.Store.Username != "" {
				t.Errorf("TLS %v, user %q; want neither", c.Store.TLS, c.Store.Username)
			}
		}},
		{name: "https without flags trusts system roots", eps: []string{"https://etcd:2379"}, check: func(t *testing.T, c replica.Config) {
			if c.Store.TLS == nil || c.Store.TLS.RootCAs != nil {
				t.Errorf("TLS %v; want TLS with system roots", c.Store.TLS)
			}
		}},
		{name: "tls files", f: etcdClientFlags{caCert: pki.caFile, cert: pki.clientCert, key: pki.clientKey}, eps: []string{"https://127.0.0.1:2379"},
			check: func(t *testing.T, c replica.Config) {
				if c.Store.TLS == nil || c.Store.TLS.RootCAs == nil || len(c.Store.TLS.Certificates) != 1 || c.Store.TLS.MinVersion != tls.VersionTLS12 {
					t.Errorf("TLS %+v; want the CA and one client certificate", c.Store.TLS)
				}
			}},
		{name: "password from env", f: etcdClientFlags{username: "root"}, eps: []string{"http://e:2379"}, env: "pw", check: func(t *testing.T, c replica.Config) {
			if c.Store.Username != "root" || c.Store.Password != "pw" {
				t.Errorf("user %q password %q; want root, pw", c.Store.Username, c.Store.Password)
			}
		}},
		{name: "flag beats env", f: etcdClientFlags{username: "root", password: "flag"}, eps: []string{"http://e:2379"}, env: "pw", check: func(t *testing.T, c replica.Config) {
			if c.Store.Password != "flag" {
				t.Errorf("password %q; want flag", c.Store.Password)
			}
		}},
		{name: "cert without key", f: etcdClientFlags{cert: pki.clientCert}, eps: []string{"https://e:2379"}, wantErr: "go together"},
		{name: "bad CA file", f: etcdClientFlags{caCert: pki.clientKey}, eps: []string{"https://e:2379"}, wantErr: "no PEM certificate"},
		{name: "tls needs external etcd", f: etcdClientFlags{caCert: pki.caFile}, wantErr: "need --etcd-endpoints"},
		{name: "password needs user", f: etcdClientFlags{password: "x"}, eps: []string{"http://e:2379"}, wantErr: "needs --etcd-username"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := replica.Config{EtcdEndpoints: tc.eps}
			err := tc.f.apply(&cfg, env(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, cfg)
		})
	}
}

func TestParseEtcdFlags(t *testing.T) {
	var stderr bytes.Buffer
	c, err := parseEtcdFlags([]string{"--name", "e1", "--listen-client", "127.0.0.1:3379", "--listen-peer", "127.0.0.1:3380",
		"--initial-cluster", "e1=127.0.0.1:3380,e2=http://127.0.0.1:3390", "--auto-compaction-retention", "0"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := c.embedConfig(zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if ec.Dir != "e1.etcd" || ec.InitialCluster != "e1=http://127.0.0.1:3380,e2=http://127.0.0.1:3390" ||
		ec.MaxTxnOps != store.EmbeddedMaxTxnOps || ec.AutoCompactionRetention != "0" || ec.ListenClientUrls[0].String() != "http://127.0.0.1:3379" {
		t.Errorf("config: dir %q, cluster %q, max txn ops %d, retention %q, client %v", ec.Dir, ec.InitialCluster, ec.MaxTxnOps, ec.AutoCompactionRetention, ec.ListenClientUrls)
	}
	for _, args := range [][]string{{"--initial-cluster-state", "maybe"}, {"extra"}} {
		if _, err := parseEtcdFlags(args, &stderr); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

// TestEtcdMemberRuns starts berth etcd in-process, writes through it, and
// stops it the way SIGTERM does (its context ends): it must return nil.
func TestEtcdMemberRuns(t *testing.T) {
	client, peer := freeLoopback(t), freeLoopback(t)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() {
		done <- etcdMember(ctx, []string{"--name", "solo", "--data-dir", t.TempDir(), "--listen-client", client, "--listen-peer", peer, "--log-level", "error"}, &stderr)
	}()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Put(cctx, "k", "v")
		cancel()
		if err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("berth etcd exited: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write through berth etcd after 60s: %v", err)
		}
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("berth etcd after stop: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("berth etcd did not stop within 30s")
	}
}
