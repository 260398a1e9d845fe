package secure

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/server/auth"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // a poll interval, not a wait for an outcome
	}
}

func getSeed(conn *grpc.ClientConn, ns string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := berthv1.NewPodServiceClient(conn).GetPod(ctx, &berthv1.GetPodRequest{Namespace: ns, Name: "seed"})
	return err
}

func canGetSeed(_ *testing.T, conn *grpc.ClientConn, ns string) error { return getSeed(conn, ns) }

// TestRotationUnderLoad rotates the server certificate, the client CA
// bundle, the policy and the tokens while a client whose access does not
// change calls on, over one long-lived connection and a new one per call;
// none of its calls may fail.
func TestRotationUnderLoad(t *testing.T) {
	e := startSecure(t)
	seed(t, e.conn(t, caller{cert: "admin"}))
	steady := e.conn(t, caller{cert: "orch-a"})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []error
	calls := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		const maxCalls = 100000 // bounds the loop if the rotations hang
		for i := 0; i < maxCalls; i++ {
			select {
			case <-stop:
				return
			default:
			}
			err := getSeed(steady, "a")
			if fresh, derr := e.dial(caller{cert: "orch-a"}); derr != nil {
				err = errors.Join(err, derr)
			} else {
				err = errors.Join(err, getSeed(fresh, "a"))
				fresh.Close()
			}
			mu.Lock()
			calls += 2
			if err != nil {
				failures = append(failures, err)
			}
			mu.Unlock()
		}
	}()

	// Each rotation happens while the client is making calls.
	busy := func() {
		mu.Lock()
		target := calls + 40
		mu.Unlock()
		waitFor(t, "the steady client's calls", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return calls >= target
		})
	}

	// 1. A new server certificate from the same CA.
	busy()
	old := e.serverSerial(t)
	issueServer(t, e.ca, e.dir)
	waitFor(t, "the new server certificate", func() bool { return e.serverSerial(t) != old })

	busy()
	// 2. A second CA joins the client CA bundle (and the clients' trust);
	// a certificate it signed becomes usable, the old ones stay so.
	ca2, err := auth.NewCA("test CA 2", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	issueClient(t, ca2, e.dir, "orch-a-ca2", auth.CertRequest{CommonName: "orch-a"})
	bundle := append(e.ca.CertPEM(), ca2.CertPEM()...)
	writeFile(t, filepath.Join(e.dir, "ca.crt"), bundle)
	waitFor(t, "the second CA", func() bool {
		c := e.conn(t, caller{cert: "orch-a-ca2"})
		defer c.Close()
		return canGetSeed(t, c, "a") == nil
	})

	busy()
	// 3. The policy grants a newcomer and widens the observer.
	issueClient(t, e.ca, e.dir, "newbie", auth.CertRequest{})
	writeFile(t, filepath.Join(e.dir, "policy.yaml"), []byte(policyYAML+
		"  - {identity: newbie, role: observer}\n"))
	waitFor(t, "the new policy", func() bool {
		c := e.conn(t, caller{cert: "newbie"})
		defer c.Close()
		return canGetSeed(t, c, "b") == nil
	})

	busy()
	// 4. A new token.
	tokens, err := os.ReadFile(filepath.Join(e.dir, "tokens"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(e.dir, "tokens"), append(tokens, []byte(auth.HashToken("fresh-token")+" newbie\n")...))
	waitFor(t, "the new token", func() bool {
		c := e.conn(t, caller{token: "fresh-token"})
		defer c.Close()
		return canGetSeed(t, c, "b") == nil
	})

	busy()
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if calls == 0 {
		t.Fatal("the steady client made no calls during the rotations")
	}
	if len(failures) > 0 {
		t.Fatalf("%d of %d calls of a client whose access did not change failed, first: %v", len(failures), calls, failures[0])
	}
	t.Logf("%d calls during the rotations, none failed", calls)

	// A revoked identity loses access on its open connection.
	writeFile(t, filepath.Join(e.dir, "policy.yaml"), []byte("grants:\n  - {identity: admin, role: admin}\n"))
	waitFor(t, "the revocation", func() bool { return canGetSeed(t, steady, "a") != nil })
}
