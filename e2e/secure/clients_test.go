package secure

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	berth "github.com/berth-io/berth/clients/go"
)

// TestGoClientCredentials: the Go client's TLS and token options reach a
// secured replica; without credentials it is refused.
func TestGoClientCredentials(t *testing.T) {
	e := startSecure(t)
	dial := func(files berth.TLSFiles, opts ...berth.Option) *berth.Client {
		t.Helper()
		cfg, err := files.TLSConfig()
		if err != nil {
			t.Fatal(err)
		}
		c, err := berth.Dial(tctx(t, 10*time.Second), e.addr, append([]berth.Option{berth.WithTLS(cfg), berth.WithMaxAttempts(1)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	ca := filepath.Join(e.dir, "ca.crt")
	withCert := dial(berth.TLSFiles{CACert: ca, Cert: filepath.Join(e.dir, "admin.crt"), Key: filepath.Join(e.dir, "admin.key")})
	if _, _, err := withCert.ListNodes(tctx(t, 10*time.Second), 10, ""); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	withToken := dial(berth.TLSFiles{CACert: ca}, berth.WithBearerToken(adminToken))
	if _, _, err := withToken.ListNodes(tctx(t, 10*time.Second), 10, ""); err != nil {
		t.Errorf("bearer token: %v", err)
	}
	anonymous := dial(berth.TLSFiles{CACert: ca})
	if _, _, err := anonymous.ListNodes(tctx(t, 10*time.Second), 10, ""); status.Code(err) != codes.Unauthenticated {
		t.Errorf("no credentials: %v, want Unauthenticated", err)
	}
	if _, err := (berth.TLSFiles{CACert: ca, Cert: filepath.Join(e.dir, "admin.crt")}).TLSConfig(); err == nil {
		t.Error("a certificate without its key was accepted")
	}
}

// TestMetricsListenerTLS: the metrics listener serves the same certificate
// and requires a client certificate from the client CA; pprof is off.
func TestMetricsListenerTLS(t *testing.T) {
	e := startSecure(t)
	get := func(cert, path string) (int, error) {
		files := berth.TLSFiles{CACert: filepath.Join(e.dir, "ca.crt")}
		if cert != "" {
			files.Cert, files.Key = filepath.Join(e.dir, cert+".crt"), filepath.Join(e.dir, cert+".key")
		}
		cfg, err := files.TLSConfig()
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
		defer client.CloseIdleConnections()
		resp, err := client.Get("https://" + e.srv.MetricsAddr() + path)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get("admin", "/metrics"); err != nil || code != http.StatusOK {
		t.Errorf("metrics with a client certificate: %d %v", code, err)
	}
	if code, err := get("admin", "/debug/pprof/"); err != nil || code != http.StatusNotFound {
		t.Errorf("pprof without --enable-pprof: %d %v, want 404", code, err)
	}
	if _, err := get("", "/metrics"); err == nil {
		t.Error("metrics without a client certificate were served")
	}
	if _, err := get("foreign", "/metrics"); err == nil {
		t.Error("metrics for a certificate from another CA were served")
	}
}
