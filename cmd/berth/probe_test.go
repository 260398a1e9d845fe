package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestProbe(t *testing.T) {
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
