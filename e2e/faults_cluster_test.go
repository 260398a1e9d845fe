package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	berth "github.com/berth-io/berth/clients/go"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// child is a restartable berth process (etcd member or replica). Its
// stderr is kept, truncated to the last logKeep bytes, for failure reports.
type child struct {
	name string
	args []string
	// addrs are the loopback addresses the child listens on. While it is
	// down the suite holds them, so that no other test's listener (an
	// embedded etcd, a gRPC server in a package tested alongside) takes
	// the port and answers the load in its place.
	addrs []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  []byte
	held []net.Listener
}

const logKeep = 64 << 10

func (c *child) start(t *testing.T) {
	t.Helper()
	c.unhold()
	cmd := exec.Command(berthBin, c.args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", c.name, err)
	}
	done := make(chan struct{})
	c.mu.Lock()
	c.cmd, c.done = cmd, done
	c.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			c.mu.Lock()
			c.log = append(c.log, sc.Bytes()...)
			c.log = append(c.log, '\n')
			if len(c.log) > 2*logKeep {
				c.log = append(c.log[:0], c.log[len(c.log)-logKeep:]...)
			}
			c.mu.Unlock()
		}
		_ = cmd.Wait()
		c.hold()
		close(done)
	}()
}

// hold takes the child's addresses the moment it has exited. A listener
// that closes every connection makes clients see the child as down, as
// they would if the port were closed. An address someone else took first
// is left to them.
func (c *child) hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, addr := range c.addrs {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		c.held = append(c.held, l)
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				conn.Close()
			}
		}()
	}
}

// unhold frees the held addresses for the child's next start, or at the
// end of the test.
func (c *child) unhold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.held {
		l.Close()
	}
	c.held = nil
}

func (c *child) running() (*exec.Cmd, chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cmd, c.done
}

func (c *child) alive() bool {
	_, done := c.running()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// kill9 is a crash: no shutdown path runs.
func (c *child) kill9() {
	cmd, done := c.running()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// term stops gracefully and returns the exit code (-1 if it had to be
// killed after the grace period).
func (c *child) term(grace time.Duration) int {
	cmd, done := c.running()
	if cmd == nil {
		return 0
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(grace):
		c.kill9()
		return -1
	}
}

func (c *child) logs() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.log)
}

// etcdCluster is three berth etcd members on loopback, with no
// compaction, so that the whole history can be read back at the end.
type etcdCluster struct {
	members   []*child
	endpoints []string // client URLs, by member
}

func startEtcdCluster(t *testing.T, n int) *etcdCluster {
	t.Helper()
	ec := &etcdCluster{}
	var peers []string
	clientAddrs := make([]string, n)
	var releases []func()
	for i := range n {
		client, releaseClient := reserveAddr(t)
		peer, releasePeer := reserveAddr(t)
		clientAddrs[i] = client
		peers = append(peers, fmt.Sprintf("e%d=http://%s", i, peer))
		releases = append(releases, releaseClient, releasePeer)
	}
	dir := t.TempDir()
	token := fmt.Sprintf("faults-%d", rand.Int64())
	for i := range n {
		_, peerURL, _ := strings.Cut(peers[i], "=")
		peer := strings.TrimPrefix(peerURL, "http://")
		ec.endpoints = append(ec.endpoints, "http://"+clientAddrs[i])
		ec.members = append(ec.members, &child{
			name:  fmt.Sprintf("etcd e%d", i),
			addrs: []string{clientAddrs[i], peer},
			args: []string{"etcd", "--name", fmt.Sprintf("e%d", i), "--data-dir", filepath.Join(dir, fmt.Sprintf("e%d", i)),
				"--listen-client", clientAddrs[i], "--listen-peer", peer,
				"--initial-cluster", strings.Join(peers, ","), "--initial-cluster-token", token,
				"--auto-compaction-retention", "0", "--log-level", "error"},
		})
	}
	for _, release := range releases {
		release()
	}
	for _, m := range ec.members {
		m.start(t)
	}
	t.Cleanup(func() {
		for _, m := range ec.members {
			m.kill9()
			m.unhold()
		}
		if t.Failed() {
			for _, m := range ec.members {
				t.Logf("%s log (tail):\n%s", m.name, tail(m.logs(), 4<<10))
			}
		}
	})
	for i := range n {
		ec.waitMember(t, i)
	}
	return ec
}

// client is a direct client of every member: the suite's view of etcd,
// never through a proxy.
func (ec *etcdCluster) client(t *testing.T) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: ec.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitMember polls member i's status until it reports a leader.
func (ec *etcdCluster) waitMember(t *testing.T, i int) {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: ec.endpoints[i : i+1], DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pollUntil(t, 60*time.Second, "etcd member e"+fmt.Sprint(i)+" up", func() error {
		if !ec.members[i].alive() {
			t.Fatalf("%s exited:\n%s", ec.members[i].name, tail(ec.members[i].logs(), 4<<10))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := c.Status(ctx, ec.endpoints[i])
		if err != nil {
			return err
		}
		if st.Leader == 0 {
			return errors.New("no leader")
		}
		return nil
	})
}

// leader returns the index of the member that leads, asking each live
// member in turn.
func (ec *etcdCluster) leader(t *testing.T, c *clientv3.Client) int {
	t.Helper()
	var idx int
	pollUntil(t, 30*time.Second, "etcd leader", func() error {
		for i, ep := range ec.endpoints {
			if !ec.members[i].alive() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := c.Status(ctx, ep)
			cancel()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				idx = i
				return nil
			}
		}
		return errors.New("no member says it leads")
	})
	return idx
}

// replica is one berth serve process whose etcd traffic goes through its
// own proxies, one per member, so it can be cut off alone.
type replica struct {
	*child
	id      string
	addr    string
	proxies []*cutProxy
	client  *berth.Client
	// releaseAddr frees addr, held since the replica was set up, for its
	// first start.
	releaseAddr func()
}

// serveFlags is which optional berth serve flags this build has: the suite
// runs against a tree where multi-replica support may still be landing.
type serveFlagSet map[string]bool

func probeServeFlags(t *testing.T) serveFlagSet {
	t.Helper()
	out, _ := exec.Command(berthBin, "serve", "-h").CombinedOutput()
	flags := serveFlagSet{}
	for _, f := range []string{"lease-ttl", "replica-id", "shards"} {
		flags[f] = strings.Contains(string(out), "-"+f+" ")
	}
	return flags
}

type replicaOptions struct {
	leaseTTL time.Duration
	shards   int
}

func startReplicas(t *testing.T, ec *etcdCluster, n int, opt replicaOptions) []*replica {
	t.Helper()
	flags := probeServeFlags(t)
	var rs []*replica
	for i := range n {
		addr, release := reserveAddr(t)
		r := &replica{id: fmt.Sprintf("r%d", i), addr: addr, releaseAddr: release}
		var eps []string
		for _, ep := range ec.endpoints {
			p := startCutProxy(t, strings.TrimPrefix(ep, "http://"))
			r.proxies = append(r.proxies, p)
			eps = append(eps, "http://"+p.addr())
		}
		args := []string{"serve", "--listen", r.addr, "--metrics-listen", "-", "--log-level", "warn",
			"--etcd-endpoints", strings.Join(eps, ","), "--etcd-request-timeout", "3s", "--etcd-commit-workers", "2"}
		if flags["lease-ttl"] {
			args = append(args, "--lease-ttl", opt.leaseTTL.String())
		}
		if flags["replica-id"] {
			args = append(args, "--replica-id", r.id)
		}
		if flags["shards"] && opt.shards > 0 {
			args = append(args, "--shards", fmt.Sprint(opt.shards))
		}
		r.child = &child{name: "replica " + r.id, args: args, addrs: []string{r.addr}}
		c, err := berth.Dial(context.Background(), r.addr, berth.WithMaxAttempts(2), berth.WithBackoff(50*time.Millisecond, 500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		r.client = c
		t.Cleanup(func() { c.Close() })
		rs = append(rs, r)
	}
	if missing := missingFlags(flags); missing != "" {
		t.Logf("berth serve lacks %s: replicas run without them (multi-replica support not landed?)", missing)
	}
	for _, r := range rs {
		r.releaseAddr()
		r.start(t)
	}
	t.Cleanup(func() {
		for _, r := range rs {
			r.kill9()
			r.unhold()
		}
		if t.Failed() {
			for _, r := range rs {
				t.Logf("%s log (tail):\n%s", r.name, tail(r.logs(), 8<<10))
			}
		}
	})
	for _, r := range rs {
		r.waitServing(t)
	}
	return rs
}

func missingFlags(f serveFlagSet) string {
	var m []string
	for _, name := range []string{"lease-ttl", "replica-id", "shards"} {
		if !f[name] {
			m = append(m, "--"+name)
		}
	}
	return strings.Join(m, ", ")
}

// waitServing polls the health service until SERVING.
func (r *replica) waitServing(t *testing.T) {
	t.Helper()
	hc := healthpb.NewHealthClient(r.client.Conn())
	pollUntil(t, 60*time.Second, r.name+" serving", func() error {
		if !r.alive() {
			t.Fatalf("%s exited before serving:\n%s", r.name, tail(r.logs(), 8<<10))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return errors.New(resp.GetStatus().String())
		}
		return nil
	})
}

func (r *replica) setCut(cut bool) {
	for _, p := range r.proxies {
		p.setCut(cut)
	}
}

// listReplicas asks r for the live replicas; ok is false when the server
// does not implement it yet.
func listReplicas(ctx context.Context, r *replica) (*berthv1.ListReplicasResponse, bool, error) {
	resp, err := r.client.SchedulerService().ListReplicas(ctx, &berthv1.ListReplicasRequest{})
	if isUnimplemented(err) {
		return nil, false, nil
	}
	return resp, true, err
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
