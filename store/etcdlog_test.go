package store

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestEtcdLoggerDropsBenignNoise(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	lg := etcdLogger(zap.New(core)).With(zap.String("member", "berth"))

	lg.Info("starting an etcd server")
	lg.Warn("Running http and grpc server on single port. This is not recommended for production.")
	lg.Error("setting up serving from embedded etcd failed.", zap.Error(errors.New("http: Server closed")))
	lg.Error("setting up serving from embedded etcd failed.", zap.Error(errors.New("accept tcp 127.0.0.1:1: use of closed network connection")))
	lg.Warn("stopping insecure grpc server due to error", zap.Error(errors.New("accept tcp: use of closed network connection")))
	lg.Warn("failed to publish local member to cluster through raft", zap.Error(errors.New("etcdserver: too many requests")))
	lg.Warn("Failed to detect schema version", zap.Error(errors.New("missing term information")))
	lg.Error("failed to update storage version", zap.Error(errors.New("cannot detect storage schema version: missing term information")))
	// The same messages with another cause are news.
	lg.Error("setting up serving from embedded etcd failed.", zap.Error(errors.New("listen tcp: address already in use")))
	lg.Warn("failed to publish local member to cluster through raft", zap.Error(errors.New("etcdserver: request timed out")))
	lg.Error("failed to update storage version", zap.Error(errors.New("etcdserver: request timed out")))
	lg.Warn("slow fdatasync")

	var got []string
	for _, e := range logs.All() {
		if e.LoggerName != "etcd" {
			t.Errorf("logger %q, want etcd", e.LoggerName)
		}
		got = append(got, e.Message)
	}
	want := []string{
		"setting up serving from embedded etcd failed.",
		"failed to publish local member to cluster through raft",
		"failed to update storage version",
		"slow fdatasync",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("logged (-want,+got):\n%s", diff)
	}
}
