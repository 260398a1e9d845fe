package replica_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/replica"
	"github.com/berth-io/berth/replica/replicatest"
	"github.com/berth-io/berth/server"
	"github.com/berth-io/berth/store"
)

// healthServices are the names health checks answer for: the replica as a
// whole and each service.
var healthServices = []string{"", server.HealthClusterService, server.HealthPodService, server.HealthSchedulerService}

// waitHealth polls every service until each reports want.
func waitHealth(t *testing.T, hc healthpb.HealthClient, want healthpb.HealthCheckResponse_ServingStatus, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for {
		var off []string
		for _, svc := range healthServices {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
			cancel()
			if err != nil || resp.GetStatus() != want {
				off = append(off, fmt.Sprintf("%q: %v %v", svc, resp.GetStatus(), err))
			}
		}
		if len(off) == 0 {
			return
		}
		last = strings.Join(off, "; ")
		if time.Now().After(deadline) {
			t.Fatalf("health not %v after %v: %s", want, within, last)
		}
		time.Sleep(50 * time.Millisecond) // poll interval, not a wait for an event
	}
}

// Health follows the replica's storage: etcd stopped, every service turns
// NOT_SERVING well within a lease, and calls say why; etcd back, SERVING.
func TestHealthFollowsStorage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	etcd, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { etcd.Close() }()
	u, err := url.Parse(etcd.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	const lease = 3 * time.Second
	cfg := replica.Config{
		Listen: "127.0.0.1:0", MetricsListen: "-", EtcdEndpoints: etcd.Endpoints(),
		LeaseTTL: lease, Logger: zaptest.NewLogger(t),
	}
	cfg.Store.RequestTimeout = time.Second
	srv, err := replica.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	waitHealth(t, hc, healthpb.HealthCheckResponse_SERVING, time.Minute)

	etcd.Close()
	waitHealth(t, hc, healthpb.HealthCheckResponse_NOT_SERVING, lease)
	callCtx, callCancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = berthv1.NewPodServiceClient(conn).GetPod(callCtx, &berthv1.GetPodRequest{Namespace: "ns", Name: "p"})
	callCancel()
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "storage unavailable") {
		t.Errorf("GetPod with etcd stopped: %v; want Unavailable: storage unavailable", err)
	}

	// Back on the same data and client port, as a restarted etcd would be.
	etcd, err = store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: dir, ClientAddr: u.Host})
	if err != nil {
		t.Fatal(err)
	}
	waitHealth(t, hc, healthpb.HealthCheckResponse_SERVING, time.Minute)
}

// The embedded etcd's server metrics are served with the replica's.
func TestMetricsIncludeEmbeddedEtcd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := replica.Start(ctx, replica.Config{
		Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", DataDir: t.TempDir(),
		Embedded: store.EmbeddedConfig{Maintenance: store.MaintenanceConfig{Interval: -1}},
		Logger:   zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+srv.MetricsAddr()+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s\n%s", resp.Status, body)
	}
	for _, want := range []string{"\netcd_server_has_leader ", "\nberth_cache_revision ", "\ngo_goroutines "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
}

// advertisedAddress polls ListReplicas until the lone replica is listed,
// and returns its address.
func advertisedAddress(t *testing.T, sch berthv1.SchedulerServiceClient) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := sch.ListReplicas(tctx(t), &berthv1.ListReplicasRequest{})
		if err == nil && len(resp.GetReplicas()) == 1 {
			return resp.GetReplicas()[0].GetAddress()
		}
		if time.Now().After(deadline) {
			t.Fatalf("ListReplicas: %v, %v; want one replica", resp, err)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// A replica advertises its listener's address, or the one it is told.
func TestAdvertisedAddress(t *testing.T) {
	_, members := startReplicas(t, 1)
	if got := advertisedAddress(t, members[0].sch); got != members[0].srv.Addr() {
		t.Errorf("advertised %q, want the listener's %s", got, members[0].srv.Addr())
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := replica.Start(ctx, replica.Config{
		Listen: "0.0.0.0:0", MetricsListen: "-", DataDir: t.TempDir(), Advertise: "berth-0.berth:7070",
		Security: replica.Security{Insecure: true}, // a wildcard listener in plaintext must be asked for
		Embedded: store.EmbeddedConfig{Maintenance: store.MaintenanceConfig{Interval: -1}},
		Logger:   zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	_, port, _ := net.SplitHostPort(srv.Addr())
	conn, err := grpc.NewClient(net.JoinHostPort("127.0.0.1", port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := advertisedAddress(t, berthv1.NewSchedulerServiceClient(conn)); got != "berth-0.berth:7070" {
		t.Errorf("advertised %q, want berth-0.berth:7070", got)
	}
}

// OnServing runs before the front first answers SERVING, and only then:
// berth serve ends the collector's start-up target there.
func TestOnServingRunsAtTheFirstServing(t *testing.T) {
	var calls atomic.Int32
	srv, _ := replicatest.Start(t, func(c *replica.Config) {
		c.OnServing = func() { calls.Add(1) }
	})
	conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitHealth(t, healthpb.NewHealthClient(conn), healthpb.HealthCheckResponse_SERVING, time.Minute)
	if n := calls.Load(); n != 1 {
		t.Fatalf("OnServing ran %d times by the first SERVING; want 1", n)
	}
}
