package berth_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"google.golang.org/grpc/status"

	berth "github.com/berth-io/berth/clients/go"
	"github.com/berth-io/berth/clients/go/berthtest"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// errSeen ends a watch from inside its callback: WatchBindings returns it
// unchanged.
var errSeen = errors.New("seen")

// Example is an orchestrator's loop in brief: register a node, submit a
// pod, and learn from the watch where it was bound. berthtest stands in for
// a Berth server; it does not schedule, so the example binds the pod where
// a real server's scheduler would.
func Example() {
	srv, err := berthtest.New()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()

	ctx := context.Background()
	client, err := berth.Dial(ctx, srv.Addr)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	node, _, err := client.UpsertNode(ctx, &berthv1.Node{
		Name:        "node-1",
		Allocatable: map[string]int64{"cpu": 4000, "memory": 8 << 30, "pods": 110},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("registered", node.GetName())

	pod, rev, err := client.SubmitPod(ctx, &berthv1.Pod{
		Namespace: "default", Name: "web-1",
		Containers: []*berthv1.Container{{
			Name: "main", Image: "registry.example/web:1",
			Requests: map[string]int64{"cpu": 500, "memory": 256 << 20},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("submitted", pod.GetName(), pod.GetStatus().GetPhase())

	if err := srv.Bind("default", "web-1", "node-1"); err != nil { // the scheduler's part
		log.Fatal(err)
	}

	// Every binding after the submit's revision, in order.
	err = client.WatchBindings(ctx, rev, func(ev *berthv1.BindingEvent) error {
		fmt.Printf("%s %s/%s on %s\n", ev.GetType(), ev.GetNamespace(), ev.GetName(), ev.GetNodeName())
		if ev.GetName() == pod.GetName() {
			return errSeen
		}
		return nil
	})
	if !errors.Is(err, errSeen) {
		log.Fatal(err)
	}
	// Output:
	// registered node-1
	// submitted web-1 POD_PHASE_PENDING
	// BINDING_EVENT_TYPE_BOUND default/web-1 on node-1
}

// exampleClient starts a fake server and dials it; stop undoes both.
func exampleClient() (srv *berthtest.Server, client *berth.Client, stop func()) {
	srv, err := berthtest.New()
	if err != nil {
		log.Fatal(err)
	}
	client, err = berth.Dial(context.Background(), srv.Addr)
	if err != nil {
		log.Fatal(err)
	}
	return srv, client, func() {
		client.Close()
		srv.Stop()
	}
}

// A batch is stored pod by pod: one pod's failure is in its result, not in
// the call's error.
func ExampleClient_SubmitPods() {
	_, client, stop := exampleClient()
	defer stop()

	ctr := []*berthv1.Container{{Name: "main", Image: "registry.example/job:1"}}
	pods := []*berthv1.Pod{
		{Namespace: "batch", Name: "job-1", Containers: ctr},
		{Namespace: "batch", Name: "job-2"}, // no container: invalid
		{Namespace: "batch", Name: "job-3", Containers: ctr},
	}
	results, err := client.SubmitPods(context.Background(), pods)
	if err != nil {
		log.Fatal(err)
	}
	for i, r := range results {
		if err := berth.SubmitPodResultErr(r); err != nil {
			fmt.Printf("%s: %s\n", pods[i].GetName(), status.Code(err))
			continue
		}
		fmt.Printf("%s: %s\n", r.GetPod().GetName(), r.GetPod().GetStatus().GetPhase())
	}
	// Output:
	// job-1: POD_PHASE_PENDING
	// job-2: InvalidArgument
	// job-3: POD_PHASE_PENDING
}

// AllNodes pages through the list as it is iterated; the caller never sees
// the page tokens.
func ExampleClient_AllNodes() {
	srv, client, stop := exampleClient()
	defer stop()
	srv.SetMaxPageSize(2) // three nodes take two pages

	ctx := context.Background()
	for _, name := range []string{"node-c", "node-a", "node-b"} {
		if _, _, err := client.UpsertNode(ctx, &berthv1.Node{Name: name}); err != nil {
			log.Fatal(err)
		}
	}
	for node, err := range client.AllNodes(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(node.GetName())
	}
	// Output:
	// node-a
	// node-b
	// node-c
}

// A watch that cannot resume because its revision was compacted starts
// again from 0, which first sends every pod bound now.
func ExampleCompactedError() {
	srv, client, stop := exampleClient()
	defer stop()

	ctx := context.Background()
	// A pod submitted with its node is recorded as bound: it runs already.
	_, _, err := client.SubmitPod(ctx, &berthv1.Pod{
		Namespace: "default", Name: "db-0", NodeName: "node-1",
		Containers: []*berthv1.Container{{Name: "main", Image: "registry.example/db:1"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	srv.Compact(10)

	show := func(ev *berthv1.BindingEvent) error {
		fmt.Printf("%s %s/%s on %s\n", ev.GetType(), ev.GetNamespace(), ev.GetName(), ev.GetNodeName())
		return errSeen
	}
	err = client.WatchBindings(ctx, 1, show)
	var compacted *berth.CompactedError
	if !errors.As(err, &compacted) {
		log.Fatal(err)
	}
	fmt.Println("compacted; oldest revision", compacted.OldestRevision)
	if err := client.WatchBindings(ctx, 0, show); !errors.Is(err, errSeen) {
		log.Fatal(err)
	}
	// Output:
	// compacted; oldest revision 10
	// BINDING_EVENT_TYPE_BOUND default/db-0 on node-1
}
