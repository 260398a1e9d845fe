package store

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func TestUnavailableThenReconnects(t *testing.T) {
	dir := t.TempDir()
	e := ownEtcd(t, dir, "")
	// Dialled, not in-process: the store must outlive the server.
	s := openStore(t, e, func(c *Config) { c.RequestTimeout, c.Client = time.Second, nil })
	ctx := testCtx(t)
	if _, err := s.PutNode(ctx, &berthv1.Node{Name: "before"}); err != nil {
		t.Fatal(err)
	}
	e.Close()

	for _, tt := range []struct {
		name string
		call func(context.Context) error
	}{
		{"PutNode", func(ctx context.Context) error {
			_, err := s.PutNode(ctx, &berthv1.Node{Name: "during"})
			return err
		}},
		{"GetNode", func(ctx context.Context) error {
			_, err := s.GetNode(ctx, "before")
			return err
		}},
		{"CreatePods", func(ctx context.Context) error {
			return s.CreatePods(ctx, []*berthv1.Pod{pendingPod("ns", "p", "")})[0].Err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			callCtx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			err := tt.call(callCtx)
			if msg := errIs(err, ErrUnavailable); msg != "" {
				t.Fatal(msg)
			}
			// The store answered before the caller's deadline passed, so a
			// server can still reply Unavailable in time.
			if callCtx.Err() != nil {
				t.Errorf("answered only after the caller's deadline: %v", err)
			}
		})
	}

	// Same data, same client address: the store reconnects by itself.
	u, err := url.Parse(e.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	ownEtcd(t, dir, u.Host)
	eventually(t, "a write to succeed after restart", func() bool {
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := s.PutNode(callCtx, &berthv1.Node{Name: "after"})
		return err == nil
	})
	for _, name := range []string{"before", "after"} {
		if _, err := s.GetNode(ctx, name); err != nil {
			t.Errorf("node %s: %v", name, err)
		}
	}
}

func TestStartEmbeddedRejectsBadConfig(t *testing.T) {
	ctx := testCtx(t)
	for _, cfg := range []EmbeddedConfig{
		{}, // no dir
		{Dir: t.TempDir(), ClientAddr: "no-port"}, // bad address
	} {
		if e, err := StartEmbedded(ctx, cfg); errIs(err, ErrInvalidArgument) != "" {
			if e != nil {
				e.Close()
			}
			t.Errorf("%+v: %s", cfg, errIs(err, ErrInvalidArgument))
		}
	}
}

func TestCompactionMode(t *testing.T) {
	for _, tt := range []struct{ in, mode string }{
		{"5m", "periodic"},
		{"1h", "periodic"},
		{"100000", "revision"},
	} {
		if mode, v := compactionMode(tt.in); mode != tt.mode || v != tt.in {
			t.Errorf("%q: mode %q value %q", tt.in, mode, v)
		}
	}
}

// A single member keeps few raft entries in memory: none is needed by a
// follower, and each can hold a thousand pods.
func TestEmbeddedKeepsFewRaftEntries(t *testing.T) {
	e := ownEtcd(t, t.TempDir(), "")
	if got := e.etcd.Server.Cfg.SnapshotCatchUpEntries; got != embeddedCatchUpEntries {
		t.Errorf("SnapshotCatchUpEntries = %d, want %d", got, embeddedCatchUpEntries)
	}
}

// The embedded member purges WAL files older than its last snapshot while
// it runs, so that a restart reads little WAL, and a restart after the
// purge still has every write.
func TestEmbeddedPurgesWAL(t *testing.T) {
	dir := t.TempDir()
	start := func() *Embedded {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		e, err := StartEmbedded(ctx, EmbeddedConfig{Dir: dir, SnapshotCount: 5})
		if err != nil {
			t.Fatalf("start etcd: %v", err)
		}
		return e
	}
	e := start()
	cli := e.Client()
	ctx := context.Background()
	// Four segments' worth of writes, each its own raft entry.
	value := strings.Repeat("v", 512<<10)
	writes := 4 * walSegmentBytes / len(value)
	for i := range writes {
		if _, err := cli.Put(ctx, fmt.Sprintf("/wal/%03d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	walDir := filepath.Join(dir, "member", "wal")
	walFiles := func() []string {
		names, err := filepath.Glob(filepath.Join(walDir, "*.wal"))
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	// The entries since the last snapshot (at most 5 of 512 KB) span at
	// most two files.
	eventually(t, "the WAL purged to two files", func() bool { return len(walFiles()) <= 2 })
	cli.Close()
	e.Close()

	e = start()
	defer e.Close()
	cli = e.Client()
	defer cli.Close()
	resp, err := cli.Get(ctx, "/wal/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != writes {
		t.Fatalf("after a restart: %d keys, want %d", len(resp.Kvs), writes)
	}
	for _, kv := range resp.Kvs {
		if string(kv.Value) != value {
			t.Fatalf("%s: value of %d bytes, want %d", kv.Key, len(kv.Value), len(value))
		}
	}
}

// A lone member elects itself after a short election timeout: a restart
// waits for no peer, and the store's own request bound stays below etcd's.
func TestEmbeddedElectsQuickly(t *testing.T) {
	e := ownEtcd(t, t.TempDir(), "")
	cfg := e.etcd.Server.Cfg
	if got := time.Duration(cfg.TickMs) * time.Duration(cfg.ElectionTicks) * time.Millisecond; got != embeddedElectionMs*time.Millisecond {
		t.Errorf("election timeout %v, want %v", got, embeddedElectionMs*time.Millisecond)
	}
	if cfg.ReqTimeout() <= defaultTimeout {
		t.Errorf("etcd's request timeout %v is not above the store's %v", cfg.ReqTimeout(), defaultTimeout)
	}
}
