package store

import (
	"context"
	"net/url"
	"testing"
	"time"

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
