// Command watchflood opens many WatchBindings streams on a Berth server,
// waits until each has its first message (so the server holds them all),
// reports how many, and exits without closing any: the streams end only
// because the process is gone, as when a client crashes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func main() {
	addr := flag.String("addr", "", "berth gRPC address")
	streams := flag.Int("streams", 10000, "streams to open")
	conns := flag.Int("conns", 20, "connections to spread them over")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	clients := make([]berthv1.SchedulerServiceClient, *conns)
	for i := range clients {
		conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			fail(err)
		}
		clients[i] = berthv1.NewSchedulerServiceClient(conn)
	}
	var wg sync.WaitGroup
	errs := make(chan error, *streams)
	// A bounded number of openers: the point is the streams, not a
	// thundering herd of goroutines in this process.
	next := make(chan int)
	for range 200 {
		wg.Go(func() {
			for i := range next {
				stream, err := clients[i%len(clients)].WatchBindings(ctx, &berthv1.WatchBindingsRequest{})
				if err == nil {
					_, err = stream.Recv() // the listing's progress marker
				}
				if err != nil {
					errs <- fmt.Errorf("stream %d: %w", i, err)
				}
			}
		})
	}
	for i := range *streams {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	if err, ok := <-errs; ok {
		fail(err)
	}
	fmt.Printf("opened %d\n", *streams)
	os.Exit(0) // no Close, no cancel: the kernel drops the connections
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "watchflood:", err)
	os.Exit(1)
}
