package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

const probeUsage = `Usage: berth probe [flags]

Asks a replica's gRPC health service whether it is SERVING and exits 0 if
so, 1 if not. For container healthchecks where the image has no shell and
no other client (deploy/compose.yaml); Kubernetes probes the same service
natively.

Flags:
`

func runProbe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("probe", probeUsage, stderr)
	addr := fs.String("addr", "127.0.0.1:7070", "replica gRPC address")
	service := fs.String("service", "", `health service name ("": the whole replica; or e.g. berth.v1.PodService)`)
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: *service})
	if err != nil {
		return err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("%s is %v", *addr, resp.GetStatus())
	}
	fmt.Fprintf(stdout, "%s SERVING\n", *addr)
	return nil
}
