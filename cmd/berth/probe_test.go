package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/berth-io/berth/replica"
	"github.com/berth-io/berth/server/auth"
)

func TestProbe(t *testing.T) {
	for _, v := range []string{"BERTH_CACERT", "BERTH_CERT", "BERTH_KEY"} {
		t.Setenv(v, "")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := health.NewServer()
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	go gs.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(gs.Stop)
	addr := lis.Addr().String()
	probe := func() (string, error) {
		var out, errOut bytes.Buffer
		err := runProbe(context.Background(), []string{"--addr", addr}, &out, &errOut)
		return out.String(), err
	}

	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	if _, err := probe(); err == nil || !strings.Contains(err.Error(), "NOT_SERVING") {
		t.Errorf("NOT_SERVING replica: got %v, want an error naming the status", err)
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	if out, err := probe(); err != nil || !strings.Contains(out, "SERVING") {
		t.Errorf("SERVING replica: got %q, %v", out, err)
	}
	gs.Stop()
	if _, err := probe(); err == nil {
		t.Error("stopped replica: probe succeeded")
	}
}

// TestProbeTLS probes a real replica serving mutual TLS with a policy
// that grants the probe's identity nothing: the health service is open to
// any TLS client, with or without a certificate, but the replica's
// certificate must verify.
func TestProbeTLS(t *testing.T) {
	for _, v := range []string{"BERTH_CACERT", "BERTH_CERT", "BERTH_KEY"} {
		t.Setenv(v, "")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if err := runCerts([]string{"--dir", dir, "--clients", "admin,probe"}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	other := filepath.Join(dir, "other")
	if err := runCerts([]string{"--dir", other, "--no-server"}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte("grants:\n  - {identity: admin, role: admin}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := replica.Start(ctx, replica.Config{
		Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"),
		Logger: zaptest.NewLogger(t),
		Security: replica.Security{
			TLS: auth.TLSFiles{Cert: filepath.Join(dir, "server.crt"), Key: filepath.Join(dir, "server.key"),
				ClientCA: filepath.Join(dir, "ca.crt")},
			PolicyFile: policy,
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
	ca := filepath.Join(dir, "ca.crt")
	// The replica turns SERVING a moment after its cache syncs (it must
	// hold shards too); poll until then, which also covers --live's
	// answer to a NOT_SERVING replica.
	for tick := time.NewTicker(20 * time.Millisecond); ; <-tick.C {
		var out, errOut bytes.Buffer
		if err := runProbe(ctx, []string{"--addr", srv.Addr(), "--cacert", ca, "--live"}, &out, &errOut); err != nil {
			t.Fatalf("--live on a replica not yet SERVING: %v", err)
		}
		if strings.Contains(out.String(), " SERVING") {
			tick.Stop()
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("replica not SERVING: %q", out.String())
		}
	}
	probeCert := []string{"--cert", filepath.Join(dir, "probe.crt"), "--key", filepath.Join(dir, "probe.key")}
	for _, c := range []struct {
		name string
		args []string
		ok   bool
	}{
		{"client certificate", append([]string{"--cacert", ca}, probeCert...), true},
		{"no client certificate", []string{"--cacert", ca}, true},
		{"liveness", append([]string{"--cacert", ca, "--live"}, probeCert...), true},
		{"plaintext", nil, false},
		{"another CA", append([]string{"--cacert", filepath.Join(other, "ca.crt")}, probeCert...), false},
		{"system roots", []string{"--tls"}, false},
		{"wrong server name", []string{"--cacert", ca, "--server-name", "elsewhere.example"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := runProbe(ctx, append([]string{"--addr", srv.Addr()}, c.args...), &out, &errOut)
			if c.ok && (err != nil || !strings.Contains(out.String(), "SERVING")) {
				t.Errorf("got %q, %v; want SERVING", out.String(), err)
			}
			if !c.ok && err == nil {
				t.Errorf("probe succeeded: %q", out.String())
			}
		})
	}
}
