package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func TestParsePolicy(t *testing.T) {
	p, err := ParsePolicy([]byte(`grants:
  - {identity: ops, role: admin}
  - {identity: o, role: orchestrator, namespaces: [b, a]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if g := p.grant("o"); g == nil || !g.inNamespace("a") || !g.inNamespace("b") || g.inNamespace("c") || g.inNamespace("") {
		t.Fatalf("grant o: %+v", g)
	}
	if g := p.grant("ops"); !g.inNamespace("") || !g.inNamespace("any") {
		t.Fatal("an unrestricted grant covers every namespace")
	}
	if p.grant("nobody") != nil {
		t.Fatal("unknown identity got a grant")
	}
	for _, bad := range []string{
		"grants: [{identity: x, role: root}]",
		"grants: [{role: admin}]",
		"grants: [{identity: x, role: admin, namespaces: [a]}]",
		"grants: [{identity: x, role: admin}, {identity: x, role: observer}]",
		"grants: [{identity: x, role: admin, extra: 1}]",
	} {
		if _, err := ParsePolicy([]byte(bad)); err == nil {
			t.Errorf("policy %q accepted", bad)
		}
	}
}

func TestParseTokens(t *testing.T) {
	tok, err := parseTokens([]byte("# c\n\n" + strings.ToUpper(HashToken("t1")) + " alice\n"))
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := tok.identity("t1"); !ok || id != "alice" {
		t.Fatalf("t1: %q %v", id, ok)
	}
	if _, ok := tok.identity("t2"); ok {
		t.Fatal("unknown token accepted")
	}
	for _, bad := range []string{"abc alice\n", HashToken("x") + "\n", "t1 alice\n"} {
		if _, err := parseTokens([]byte(bad)); err == nil {
			t.Errorf("tokens %q accepted", bad)
		}
	}
}

// every rule's target must read its own request type without panicking,
// including an empty one.
func TestRulesReadEmptyRequests(t *testing.T) {
	for m, r := range rules {
		if r.target != nil {
			_ = r.target(nil)
			_ = r.target(&berthv1.SubmitPodsRequest{})
		}
		if !strings.HasPrefix(m, "/berth.v1.") {
			t.Errorf("rule %s outside berth.v1", m)
		}
	}
}

func mustWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// TestUnaryAuditAndCertIdentity drives the interceptor directly: a
// certificate's URI SAN names the caller, a refused call never reaches the
// handler, and mutating calls are audited whatever their outcome.
func TestUnaryAuditAndCertIdentity(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteCA(dir); err != nil {
		t.Fatal(err)
	}
	srvCert, srvKey, err := ca.Issue(CertRequest{CommonName: "srv", Server: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteKeyPair(dir, "server", srvCert, srvKey); err != nil {
		t.Fatal(err)
	}
	spiffe, _ := url.Parse("spiffe://test/orch")
	cliPEM, _, err := ca.Issue(CertRequest{CommonName: "ignored", URIs: []*url.URL{spiffe}, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	tlsm, err := LoadTLS(TLSFiles{Cert: filepath.Join(dir, "server.crt"), Key: filepath.Join(dir, "server.key"), ClientCA: filepath.Join(dir, "ca.crt")}, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tlsm.Close()
	mustWrite(t, filepath.Join(dir, "policy"), "grants: [{identity: 'spiffe://test/orch', role: orchestrator, namespaces: [a]}]\n")
	core, logs := observer.New(zapcore.InfoLevel)
	az, err := New(Config{TLS: tlsm, PolicyFile: filepath.Join(dir, "policy"), Audit: zap.New(core), PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer az.Close()

	block, _ := pemDecode(cliPEM)
	leaf, err := x509.ParseCertificate(block)
	if err != nil {
		t.Fatal(err)
	}
	ctx := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}}})
	called := 0
	handler := func(ctx context.Context, _ any) (any, error) {
		called++
		if id, ok := IdentityFrom(ctx); !ok || id.Name != "spiffe://test/orch" {
			t.Errorf("handler identity %+v", id)
		}
		return nil, nil
	}
	info := func(m string) *grpc.UnaryServerInfo { return &grpc.UnaryServerInfo{FullMethod: m} }
	if _, err := az.Unary(ctx, &berthv1.DeletePodRequest{Namespace: "a", Name: "p"}, info(podSvc+"DeletePod"), handler); err != nil {
		t.Fatalf("allowed call: %v", err)
	}
	_, err = az.Unary(ctx, &berthv1.DeletePodRequest{Namespace: "b", Name: "p"}, info(podSvc+"DeletePod"), handler)
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("other namespace: %v", err)
	}
	_, err = az.Unary(metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer x")), &berthv1.GetPodRequest{Namespace: "a"}, info(podSvc+"GetPod"), handler)
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a token with no tokens file: %v", err)
	}
	if called != 1 {
		t.Fatalf("handler called %d times, want 1", called)
	}
	audit := logs.All()
	if len(audit) != 2 || audit[0].ContextMap()["code"] != "OK" || audit[1].ContextMap()["code"] != "PermissionDenied" ||
		audit[1].ContextMap()["object"] != "pod b/p" || audit[1].ContextMap()["identity"] != "spiffe://test/orch" {
		t.Fatalf("audit lines: %+v", audit)
	}
}

func pemDecode(data []byte) ([]byte, []byte) {
	b, rest := pem.Decode(data)
	return b.Bytes, rest
}
