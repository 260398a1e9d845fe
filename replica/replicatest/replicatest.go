// Package replicatest starts real replicas for other packages' tests: an
// embedded etcd in the test's temp dir and a replica serving on loopback,
// both stopped by the test's cleanup.
package replicatest

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/berth-io/berth/replica"
	"github.com/berth-io/berth/store"
)

// Start runs an embedded etcd and a replica on it, with no metrics listener
// unless adjust sets one, and returns once the replica's cache is synced.
// The etcd is returned too, for tests that reach it directly.
func Start(t testing.TB, adjust ...func(*replica.Config)) (*replica.Replica, *store.Embedded) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	etcd, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Close)
	cfg := replica.Config{
		Listen: "127.0.0.1:0", MetricsListen: "-", EtcdEndpoints: etcd.Endpoints(),
		Logger: zaptest.NewLogger(t),
	}
	for _, f := range adjust {
		f(&cfg)
	}
	srv, err := replica.Start(ctx, cfg)
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
	return srv, etcd
}
