package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	berth "github.com/berth-io/berth/clients/go"
)

const probeUsage = `Usage: berth probe [flags]

Asks a replica's gRPC health service whether it is SERVING and exits 0 if
so, 1 if not. For container healthchecks where the image has no shell and
no other client (deploy/compose.yaml, and the Kubernetes exec probes: the
kubelet's own gRPC probe cannot speak TLS). With --cacert (or --tls) it
speaks TLS; the health service is open to any caller, so a client
certificate (--cert, --key) is optional. --live succeeds whatever the
status, as long as the replica answers: a liveness check.

Flags:
`

func runProbe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("probe", probeUsage, stderr)
	addr := fs.String("addr", "127.0.0.1:7070", "replica gRPC address")
	service := fs.String("service", "", `health service name ("": the whole replica; or e.g. berth.v1.PodService)`)
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	live := fs.Bool("live", false, "succeed on any answer, SERVING or not (liveness rather than readiness)")
	useTLS := fs.Bool("tls", false, "speak TLS, trusting the system roots unless --cacert is given")
	var files berth.TLSFiles
	fs.StringVar(&files.CACert, "cacert", os.Getenv("BERTH_CACERT"), "PEM CA certificates that sign the replica's; implies --tls (env BERTH_CACERT)")
	fs.StringVar(&files.Cert, "cert", os.Getenv("BERTH_CERT"), "PEM client certificate; implies --tls (env BERTH_CERT)")
	fs.StringVar(&files.Key, "key", os.Getenv("BERTH_KEY"), "PEM key of --cert (env BERTH_KEY)")
	serverName := fs.String("server-name", "", "name to verify the replica's certificate against (default: the host of --addr)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	creds := insecure.NewCredentials()
	if *useTLS || files != (berth.TLSFiles{}) || *serverName != "" {
		cfg, err := files.TLSConfig()
		if err != nil {
			return err
		}
		cfg.ServerName = *serverName
		creds = credentials.NewTLS(cfg)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: *service})
	if err != nil {
		return err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING && !*live {
		return fmt.Errorf("%s is %v", *addr, resp.GetStatus())
	}
	fmt.Fprintf(stdout, "%s %v\n", *addr, resp.GetStatus())
	return nil
}
