package algorithm

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/berth-io/berth/scheduler/cache"
	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/runtime"
	"github.com/berth-io/berth/scheduler/plugins"
)

var seeds = flag.Int("seeds", 10, "seeds of TestBatchingMatchesUnbatched")

// versionedNominator is a PodNominator that numbers its changes, as the
// scheduler's does, so the memo can run while it holds nothing.
type versionedNominator struct {
	mu      sync.Mutex
	byNode  map[string][]*framework.PodInfo
	count   int
	version uint64
}

func (n *versionedNominator) NominatedPodsForNode(node string) []*framework.PodInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.byNode[node]
}

func (n *versionedNominator) NominationsVersion() (uint64, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.version, n.count == 0
}

func (n *versionedNominator) set(node string, pods []*framework.PodInfo) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.byNode == nil {
		n.byNode = map[string][]*framework.PodInfo{}
	}
	n.count += len(pods) - len(n.byNode[node])
	if len(pods) == 0 {
		delete(n.byNode, node)
	} else {
		n.byNode[node] = pods
	}
	n.version += 2
}

// world is one cache, its snapshot, a framework over it and a placer.
type world struct {
	cache  *cache.Cache
	snap   *cache.Snapshot
	fwk    *runtime.Framework
	placer *Placer
}

func newWorld(t *testing.T, nom *versionedNominator, seed uint64, batching bool) *world {
	t.Helper()
	return newWorldOver(t, nom, seed, batching, false)
}

// plainLister hides what a cache snapshot offers beyond framework's
// SharedLister (its change log), so plugins count from every node.
type plainLister struct{ framework.SharedLister }

// newWorldOver is newWorld whose plugins, if recount is set, cannot keep
// counts across cycles: the reference for the ones that do.
func newWorldOver(t *testing.T, nom *versionedNominator, seed uint64, batching, recount bool) *world {
	t.Helper()
	w := &world{cache: cache.New(), snap: cache.NewEmptySnapshot()}
	var lister framework.SharedLister = w.snap
	if recount {
		lister = plainLister{w.snap}
	}
	fwk, err := runtime.NewFramework(ctx, plugins.NewInTreeRegistry(), runtime.DefaultProfile(),
		runtime.WithSnapshotSharedLister(lister), runtime.WithPodNominator(nom), runtime.WithParallelism(2))
	if err != nil {
		t.Fatal(err)
	}
	w.fwk = fwk
	w.placer = New(0, WithRandSeed(seed, seed^0x5eed), WithSignatureBatching(batching))
	return w
}

// outcome is what a cycle decided, in comparable form.
type outcome struct {
	Host                     string
	Evaluated, Feasible      int
	Err                      string
	Nodes                    map[string]string
	Absent                   string
	Plugins                  []string
	PreFilterMsg, FitMessage string
}

func statusString(s *framework.Status) string {
	if s == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%v/%s/%q", s.Code(), s.Plugin(), s.Reasons())
}

func (w *world) schedule(t *testing.T, pod *framework.Pod) outcome {
	t.Helper()
	if err := w.cache.UpdateSnapshot(w.snap); err != nil {
		t.Fatal(err)
	}
	res, err := w.placer.Schedule(ctx, w.fwk, framework.NewCycleState(), framework.NewPodInfo(pod))
	o := outcome{Host: res.SuggestedHost, Evaluated: res.EvaluatedNodes, Feasible: res.FeasibleNodes}
	var fe *framework.FitError
	switch {
	case errors.As(err, &fe):
		d := fe.Diagnosis
		o.Nodes = map[string]string{}
		d.NodeToStatus.ForEachExplicitNode(func(name string, s *framework.Status) { o.Nodes[name] = statusString(s) })
		o.Absent = statusString(d.NodeToStatus.AbsentNodesStatus())
		for p := range d.UnschedulablePlugins {
			o.Plugins = append(o.Plugins, p)
		}
		sort.Strings(o.Plugins)
		o.PreFilterMsg, o.FitMessage = d.PreFilterMsg, fe.Error()
	case err != nil:
		o.Err = err.Error()
	}
	return o
}

// explain returns a dry run in comparable form.
func (w *world) explain(t *testing.T, pod *framework.Pod) string {
	t.Helper()
	ex, err := w.placer.Explain(ctx, w.fwk, framework.NewCycleState(), framework.NewPodInfo(pod))
	fit := ""
	if ex.FitError != nil {
		fit = ex.FitError.Error()
	}
	ex.FitError = nil
	return fmt.Sprintf("%+v %v %s", ex, err, fit)
}

// shapes are the kinds of pods the differential test mixes; pods of one
// shape share a signature when they can have one at all.
func shapes() []func(p *framework.Pod) {
	req := func(cpu, mem int64) func(*framework.Pod) {
		return func(p *framework.Pod) {
			p.Containers = []framework.Container{{Name: "c", Requests: framework.ResourceList{framework.ResourceCPU: cpu, framework.ResourceMemory: mem}}}
		}
	}
	with := func(base func(*framework.Pod), more func(*framework.Pod)) func(*framework.Pod) {
		return func(p *framework.Pod) { base(p); more(p) }
	}
	// Small pods are labelled as the zone-wide anti-affinity's selector
	// wants: existing pods with terms then change their results on nodes
	// that did not change.
	small := with(req(200, Gi/2), func(p *framework.Pod) { p.Labels = map[string]string{"app": "web"} })
	big := req(1500, 2*Gi)
	return []func(*framework.Pod){
		small,
		big,
		with(small, func(p *framework.Pod) { p.NodeSelector = map[string]string{"zone": "z1"} }),
		with(small, func(p *framework.Pod) { p.NodeSelector = map[string]string{"disk": "ssd"} }),
		with(big, func(p *framework.Pod) {
			p.Tolerations = []framework.Toleration{{Key: "dedicated", Operator: framework.TolerationOpEqual, Value: "db", Effect: framework.TaintEffectNoSchedule}}
		}),
		with(small, func(p *framework.Pod) {
			p.Tolerations = []framework.Toleration{{Key: "spot", Operator: framework.TolerationOpExists}}
		}),
		with(small, func(p *framework.Pod) {
			p.Affinity = &framework.Affinity{NodeAffinity: &framework.NodeAffinity{Required: &framework.NodeSelector{NodeSelectorTerms: []framework.NodeSelectorTerm{{
				MatchExpressions: []framework.NodeSelectorRequirement{{Key: "zone", Operator: framework.NodeSelectorOpIn, Values: []string{"z0", "z2"}}}}}}}}
		}),
		with(small, func(p *framework.Pod) {
			p.Affinity = &framework.Affinity{NodeAffinity: &framework.NodeAffinity{Preferred: []framework.PreferredSchedulingTerm{{Weight: 30, Preference: framework.NodeSelectorTerm{
				MatchExpressions: []framework.NodeSelectorRequirement{{Key: "disk", Operator: framework.NodeSelectorOpIn, Values: []string{"ssd"}}}}}}}}
		}),
		with(small, func(p *framework.Pod) {
			p.Labels = map[string]string{"app": "spread"}
			p.TopologySpreadConstraints = []framework.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone",
				WhenUnsatisfiable: framework.DoNotSchedule, LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
		}),
		with(small, func(p *framework.Pod) {
			p.Labels = map[string]string{"app": "anti"}
			p.Affinity = &framework.Affinity{PodAntiAffinity: &framework.PodAntiAffinity{Required: []framework.PodAffinityTerm{{
				LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "anti"}}, TopologyKey: framework.LabelHostname}}}}
		}),
		with(small, func(p *framework.Pod) {
			p.Containers[0].Ports = []framework.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: framework.ProtocolTCP}}
		}),
		with(big, func(p *framework.Pod) { p.Priority = 1000 }),
		with(small, func(p *framework.Pod) {
			p.Containers[0].Image = "img-a"
			p.EditExtras().InitContainers = []framework.Container{{Name: "i", Image: "img-b:v1"}}
		}),
		func(p *framework.Pod) { p.Containers = []framework.Container{{Name: "c", Image: "img-c"}} }, // best effort
		with(req(100, Gi/4), func(p *framework.Pod) {
			p.Affinity = &framework.Affinity{PodAntiAffinity: &framework.PodAntiAffinity{Preferred: []framework.WeightedPodAffinityTerm{{Weight: 50,
				Term: framework.PodAffinityTerm{LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: "zone"}}}}}
		}),
		// More spreading over other selectors and topology keys, and
		// affinity terms counting existing pods: each has its counts kept
		// across cycles.
		with(small, func(p *framework.Pod) {
			p.Labels = map[string]string{"app": "spread", "tier": "a"}
			p.TopologySpreadConstraints = []framework.TopologySpreadConstraint{
				{MaxSkew: 2, TopologyKey: framework.LabelTopologyZone, WhenUnsatisfiable: framework.DoNotSchedule,
					LabelSelector: &framework.LabelSelector{MatchExpressions: []framework.LabelSelectorRequirement{{Key: "app", Operator: framework.LabelSelectorOpIn, Values: []string{"spread", "web"}}}}},
				{MaxSkew: 1, TopologyKey: framework.LabelHostname, WhenUnsatisfiable: framework.ScheduleAnyway,
					LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}, MatchLabelKeys: []string{"tier"}},
			}
		}),
		with(small, func(p *framework.Pod) {
			p.Labels = map[string]string{"app": "spread", "tier": "b"}
			p.TopologySpreadConstraints = []framework.TopologySpreadConstraint{
				{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: framework.ScheduleAnyway,
					LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}, MatchLabelKeys: []string{"tier"}},
			}
		}),
		with(small, func(p *framework.Pod) {
			minDomains := int32(4)
			p.Labels = map[string]string{"app": "tainted"}
			p.Tolerations = []framework.Toleration{{Key: "dedicated", Operator: framework.TolerationOpExists}}
			p.TopologySpreadConstraints = []framework.TopologySpreadConstraint{{MaxSkew: 3, TopologyKey: "zone", WhenUnsatisfiable: framework.DoNotSchedule,
				MinDomains: &minDomains, NodeTaintsPolicy: framework.NodeInclusionPolicyHonor,
				LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "tainted"}}}}
		}),
		with(small, func(p *framework.Pod) {
			p.Labels = map[string]string{"app": "follower"}
			p.Affinity = &framework.Affinity{PodAffinity: &framework.PodAffinity{Required: []framework.PodAffinityTerm{{
				LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: "zone"}}}}
		}),
		with(big, func(p *framework.Pod) {
			p.Affinity = &framework.Affinity{PodAntiAffinity: &framework.PodAntiAffinity{Required: []framework.PodAffinityTerm{{
				LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: framework.LabelHostname}}}}
		}),
		with(small, func(p *framework.Pod) {
			p.Labels = map[string]string{"app": "loner"}
			p.Affinity = &framework.Affinity{PodAntiAffinity: &framework.PodAntiAffinity{Required: []framework.PodAffinityTerm{
				{LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}, TopologyKey: framework.LabelHostname},
				{LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "loner"}}, TopologyKey: "zone"},
			}}}
		}),
	}
}

// clearBusy deletes the bound pods with inter-pod affinity and every
// nomination.
func (c *cluster) clearBusy(t *testing.T, nom *versionedNominator) {
	for i := 0; i < len(c.bound); {
		if p := c.bound[i]; framework.HasAffinity(p) {
			c.bound[i] = c.bound[len(c.bound)-1]
			c.bound = c.bound[:len(c.bound)-1]
			for _, w := range c.worlds {
				if err := w.cache.RemovePod(p); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		i++
	}
	for _, name := range c.names {
		if len(nom.NominatedPodsForNode(name)) > 0 {
			nom.set(name, nil)
		}
	}
}

// cluster is the nodes and bound pods both worlds share; every change is
// applied to both caches.
type cluster struct {
	worlds []*world
	rng    *rand.Rand
	nodes  map[string]*framework.Node
	names  []string
	bound  []*framework.Pod
	serial int
	// rareTaints leaves PreferNoSchedule taints on one node in 400 only,
	// so that windows differ in their highest TaintToleration score.
	rareTaints bool
}

func (c *cluster) node(name string) *framework.Node {
	i := len(c.names)
	n := &framework.Node{Name: name, Revision: 1,
		Labels:      map[string]string{"zone": fmt.Sprint("z", i%3), framework.LabelHostname: name, framework.LabelTopologyZone: fmt.Sprint("z", i%3)},
		Allocatable: framework.ResourceList{framework.ResourceCPU: 4000, framework.ResourceMemory: 8 * Gi, framework.ResourcePods: 20}}
	if i%4 == 0 {
		n.Labels["disk"] = "ssd"
	}
	switch i % 9 {
	case 3:
		n.Taints = []framework.Taint{{Key: "dedicated", Value: "db", Effect: framework.TaintEffectNoSchedule}}
	case 5:
		n.Taints = []framework.Taint{{Key: "spot", Effect: framework.TaintEffectPreferNoSchedule}}
	}
	if c.rareTaints && i%9 == 5 {
		n.Taints = nil
		if i%400 == 5 {
			n.Taints = []framework.Taint{{Key: "spot", Effect: framework.TaintEffectPreferNoSchedule}}
		}
	}
	if i%7 == 0 {
		n.Images = []framework.ContainerImage{{Names: []string{"img-a:latest"}, SizeBytes: 300 << 20}}
	}
	if i%11 == 0 {
		n.Images = append(n.Images, framework.ContainerImage{Names: []string{"img-b:v1"}, SizeBytes: 700 << 20})
	}
	return n
}

func (c *cluster) addNode() {
	name := fmt.Sprintf("node-%04d", len(c.names))
	n := c.node(name)
	c.names = append(c.names, name)
	c.putNode(n)
}

func (c *cluster) putNode(n *framework.Node) {
	c.nodes[n.Name] = n
	for _, w := range c.worlds {
		w.cache.AddNode(n)
	}
}

// relabel changes a node's labels (sometimes its zone) or taints: a new
// Node, as the cache is told about every change.
func (c *cluster) relabel() {
	old := c.nodes[c.names[c.rng.IntN(len(c.names))]]
	if old == nil {
		return
	}
	n := *old
	n.Revision++
	n.Labels = map[string]string{}
	for k, v := range old.Labels {
		n.Labels[k] = v
	}
	switch c.rng.IntN(4) {
	case 0:
		if n.Labels["disk"] == "ssd" {
			delete(n.Labels, "disk")
		} else {
			n.Labels["disk"] = "ssd"
		}
	case 1:
		z := fmt.Sprint("z", c.rng.IntN(3))
		n.Labels["zone"], n.Labels[framework.LabelTopologyZone] = z, z
	case 2:
		if len(n.Taints) > 0 {
			n.Taints = nil
		} else {
			n.Taints = []framework.Taint{{Key: "spot", Effect: framework.TaintEffectPreferNoSchedule}}
		}
	case 3:
		n.Unschedulable = !n.Unschedulable
	}
	c.putNode(&n)
}

func (c *cluster) removeNode() {
	name := c.names[c.rng.IntN(len(c.names))]
	if c.nodes[name] == nil || len(c.nodes) < 50 {
		return
	}
	delete(c.nodes, name)
	for _, w := range c.worlds {
		w.cache.RemoveNode(name)
	}
}

func (c *cluster) deletePod(t *testing.T) {
	if len(c.bound) == 0 {
		return
	}
	i := c.rng.IntN(len(c.bound))
	p := c.bound[i]
	c.bound[i] = c.bound[len(c.bound)-1]
	c.bound = c.bound[:len(c.bound)-1]
	for _, w := range c.worlds {
		if err := w.cache.RemovePod(p); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *cluster) bind(t *testing.T, p *framework.Pod, host string) {
	b := *p
	b.NodeName = host
	c.bound = append(c.bound, &b)
	for _, w := range c.worlds {
		if err := w.cache.AddPod(&b); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBatchingMatchesUnbatched places thousands of pods of mixed kinds one
// after another with and without the signature memo, from the same seed,
// on a cluster that changes in between (nodes added, relabelled, tainted,
// cordoned and removed, pods deleted, pods nominated), and requires the
// same outcome every time: host, counts, and the whole diagnosis when no
// node fits. Now and then both dry-run the pod too. A third placer, whose
// plugins cannot keep topology spread and affinity counts across cycles,
// counts them afresh every cycle and must agree as well.
func TestBatchingMatchesUnbatched(t *testing.T) {
	const pods = 2000
	for seed := range uint64(*seeds) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			nom := &versionedNominator{}
			c := &cluster{rng: rand.New(rand.NewPCG(seed, 99)), nodes: map[string]*framework.Node{}}
			batched, alone := newWorld(t, nom, seed, true), newWorld(t, nom, seed, false)
			// Both keep topology counts across cycles; the reference
			// counts every cycle from scratch, as each pod alone would.
			reference := newWorldOver(t, nom, seed, false, true)
			c.worlds = []*world{batched, alone, reference}
			for range 150 {
				c.addNode()
			}
			kinds := shapes()
			reused := 0
			for i := range pods {
				// Nominations turn the memo off (or should), and placed
				// pods with inter-pod affinity change results on nodes
				// that did not change (the stamps must catch it): each
				// comes in a stretch of its own, and every stretch starts
				// with neither.
				stretch := (i / 200) % 4
				affinity, nominations := stretch == 2, stretch == 3
				if i%200 == 0 {
					c.clearBusy(t, nom)
				}
				switch r := c.rng.IntN(100); {
				case r < 2:
					c.addNode()
				case r < 6:
					c.relabel()
				case r < 7:
					c.removeNode()
				case r < 15:
					c.deletePod(t)
				case r < 25 && nominations:
					// Nominate a high-priority pod to a node, or clear it.
					name := c.names[c.rng.IntN(len(c.names))]
					if len(nom.NominatedPodsForNode(name)) > 0 || c.rng.IntN(2) == 0 {
						nom.set(name, nil)
					} else {
						np := &framework.Pod{Name: fmt.Sprint("nominee-", i), Namespace: "ns", UID: fmt.Sprint("nominee-", i), Priority: 500,
							Containers: []framework.Container{{Name: "c", Requests: framework.ResourceList{framework.ResourceCPU: 2500}}}}
						nom.set(name, []*framework.PodInfo{framework.NewPodInfo(np)})
					}
				}
				c.serial++
				p := &framework.Pod{Name: fmt.Sprint("p-", c.serial), Namespace: "ns", UID: fmt.Sprint("uid-", c.serial)}
				kinds[c.rng.IntN(len(kinds))](p)
				for !affinity && framework.HasAffinity(p) {
					*p = framework.Pod{Name: p.Name, Namespace: p.Namespace, UID: p.UID}
					kinds[c.rng.IntN(len(kinds))](p)
				}
				if c.rng.IntN(50) == 0 {
					p.EditExtras().Rejections = map[string]int64{c.names[c.rng.IntN(len(c.names))]: 1}
				}
				if i%97 == 0 {
					a, b, ref := batched.explain(t, p), alone.explain(t, p), reference.explain(t, p)
					if a != b || b != ref {
						t.Fatalf("pod %d: Explain differs:\nbatched   %s\nalone     %s\nreference %s", i, a, b, ref)
					}
				}
				if _, ok := batched.fwk.PodSignature(framework.NewPodInfo(p)); ok {
					reused++
				}
				got, want, ref := batched.schedule(t, p), alone.schedule(t, p), reference.schedule(t, p)
				if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("pod %d (%s): outcome differs (-alone,+batched):\n%s", i, p.Name, diff)
				}
				if diff := cmp.Diff(ref, want, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("pod %d (%s): outcome differs with counts kept across cycles (-recounted,+kept):\n%s", i, p.Name, diff)
				}
				if got.Host != "" {
					c.bind(t, p, got.Host)
				}
			}
			if reused < pods/2 {
				t.Errorf("only %d of %d pods had a signature: the test exercises little", reused, pods)
			}
			t.Logf("%d of %d pods signed; memo used in %d cycles, %d filter results reused, %d cycles ranked", reused, pods, batched.placer.memoCycles,
				batched.placer.memoHits, batched.placer.rankedCycles)
			if batched.placer.memoHits < pods*10 {
				t.Errorf("the memo supplied only %d filter results: the test exercises little", batched.placer.memoHits)
			}
		})
	}
}

// TestRankedMatchesWalk is TestBatchingMatchesUnbatched at a size where
// the window is a fraction of the nodes (1,200 nodes, windows of 492) and
// rotates many times, with the pods whose cycles the ranked nodes decide
// (no inter-pod affinity, no nominations): each signature's tree is built,
// updated from the change log as pods land and nodes change, and rebuilt
// when normalizers' highest scores move, and every decision, draw and
// count must be the walk's. The last seed has few tainted nodes, so the
// windows' highest TaintToleration scores differ.
func TestRankedMatchesWalk(t *testing.T) {
	const nodes, pods, numSeeds = 1200, 800, 3
	for seed := range uint64(numSeeds) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			nom := &versionedNominator{}
			c := &cluster{rng: rand.New(rand.NewPCG(seed, 7)), nodes: map[string]*framework.Node{}, rareTaints: seed == numSeeds-1}
			batched, alone := newWorld(t, nom, seed, true), newWorld(t, nom, seed, false)
			c.worlds = []*world{batched, alone}
			for range nodes {
				c.addNode()
			}
			kinds := shapes()
			for i := range pods {
				switch r := c.rng.IntN(100); {
				case r < 2:
					c.addNode()
				case r < 8:
					c.relabel()
				case r < 9:
					c.removeNode()
				case r < 15:
					c.deletePod(t)
				}
				c.serial++
				p := &framework.Pod{Name: fmt.Sprint("p-", c.serial), Namespace: "ns", UID: fmt.Sprint("uid-", c.serial)}
				// Mostly two shapes, so signatures come back often.
				kind := kinds[c.rng.IntN(2)]
				if c.rng.IntN(4) == 0 {
					kind = kinds[c.rng.IntN(len(kinds))]
				}
				kind(p)
				for framework.HasAffinity(p) {
					*p = framework.Pod{Name: p.Name, Namespace: p.Namespace, UID: p.UID}
					kinds[c.rng.IntN(len(kinds))](p)
				}
				got, want := batched.schedule(t, p), alone.schedule(t, p)
				if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("pod %d (%s): outcome differs (-walk,+ranked):\n%s", i, p.Name, diff)
				}
				if got.Host != "" {
					c.bind(t, p, got.Host)
				}
			}
			t.Logf("%d cycles ranked of %d", batched.placer.rankedCycles, pods)
			if batched.placer.rankedCycles < pods/3 {
				t.Errorf("only %d of %d cycles were ranked: the test exercises little", batched.placer.rankedCycles, pods)
			}
		})
	}
}
