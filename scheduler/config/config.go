package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/berth-io/berth/scheduler/cache"
	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/runtime"
	"github.com/berth-io/berth/scheduler/plugins"
	"github.com/berth-io/berth/scheduler/plugins/names"
)

// DefaultSchedulerName names the profile of a file that defines none, or
// a single one without a name (kube's default-scheduler).
const DefaultSchedulerName = "default-scheduler"

// Config is what a file says, ready for scheduler.Config.
type Config struct {
	// PercentageOfNodesToScore is 0..100; 0 means kube's adaptive rule.
	PercentageOfNodesToScore int32
	// Profiles each start from runtime.DefaultProfile with the file's
	// changes applied; PluginArgs hold each plugin's own args type.
	Profiles []*runtime.Profile
}

// Option configures Load and Parse.
type Option func(*options)

type options struct {
	registry framework.Registry
	file     string
}

// WithRegistry sets the plugins a file may name; default
// plugins.NewInTreeRegistry(). Pass the registry the scheduler will use.
func WithRegistry(r framework.Registry) Option { return func(o *options) { o.registry = r } }

// WithFileName sets the name errors start with (Load uses the path).
func WithFileName(name string) Option { return func(o *options) { o.file = name } }

// Load reads and parses a configuration file; see Parse.
func Load(path string, opts ...Option) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err // *fs.PathError names the file
	}
	return Parse(data, append([]Option{WithFileName(path)}, opts...)...)
}

// Parse reads a KubeSchedulerConfiguration-shaped YAML document. Empty
// input gives one default profile. Each profile is checked by building
// it with runtime.NewFramework, so plugin args errors surface here. An
// invalid file yields Errors, each with its line and field path.
func Parse(data []byte, opts ...Option) (*Config, error) {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.registry == nil {
		o.registry = plugins.NewInTreeRegistry()
	}
	p := newProblems(o.file)

	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		p.syntax(err)
		return nil, p.err()
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		p.errs = append(p.errs, &Error{File: o.file, Line: extra.Line, Reason: "only one YAML document is allowed"})
	} else if !errors.Is(err, io.EOF) {
		p.syntax(err)
	}
	var file fileV1
	p.decodeValue(&root, "", &file)
	if p.exhausted {
		return nil, p.err() // what was decoded is cut short anywhere
	}
	// Check values even after decoding errors, to report every problem at
	// once; only building needs a clean file.
	b := &builder{problems: p, registry: o.registry}
	cfg := b.config(&file)
	if err := p.err(); err != nil {
		return nil, err
	}
	b.build(cfg)
	if err := p.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func (p *problems) decodeValue(n *yaml.Node, path string, ptr any) {
	p.decode(n, path, reflect.ValueOf(ptr).Elem())
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// syntax records a YAML syntax error under its line.
func (p *problems) syntax(err error) {
	msg := err.Error()
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Reason: "invalid YAML: " + msg})
}

// builder turns the decoded file into profiles and checks them.
type builder struct {
	*problems
	registry framework.Registry
	// Config.Profiles[i] was made from wire[i], whose field path is
	// profilePaths[i]; build uses both to place its errors.
	profilePaths []string
	wire         []profileV1
}

func (b *builder) config(f *fileV1) *Config {
	if f.APIVersion != "" && f.APIVersion != apiVersionV1 {
		b.addf("apiVersion", "unsupported apiVersion %q (want %s)", f.APIVersion, apiVersionV1)
	}
	if f.Kind != "" && f.Kind != kindConfig {
		b.addf("kind", "unsupported kind %q (want %s)", f.Kind, kindConfig)
	}
	cfg := &Config{}
	if f.PercentageOfNodesToScore != nil {
		cfg.PercentageOfNodesToScore = b.percentage(*f.PercentageOfNodesToScore, "percentageOfNodesToScore")
	}
	b.wire = f.Profiles
	if len(b.wire) == 0 {
		b.wire = []profileV1{{}} // kube: no profiles means one default profile
	}
	seen := map[string]int{}
	for i := range b.wire {
		path := index("profiles", i)
		if len(f.Profiles) == 0 {
			path = "profiles"
		}
		prof := b.profile(&b.wire[i], path, len(b.wire) == 1)
		if prof.SchedulerName != "" {
			if j, ok := seen[prof.SchedulerName]; ok {
				b.addf(path+".schedulerName", "duplicate scheduler name %q (also profiles[%d])", prof.SchedulerName, j)
			} else {
				seen[prof.SchedulerName] = i
			}
		}
		cfg.Profiles = append(cfg.Profiles, prof)
		b.profilePaths = append(b.profilePaths, path)
	}
	return cfg
}

func (b *builder) percentage(v int32, path string) int32 {
	if v < 0 || v > 100 {
		b.addf(path, "%d not in valid range [0, 100]", v)
	}
	return v
}

func (b *builder) profile(w *profileV1, path string, only bool) *runtime.Profile {
	prof := runtime.DefaultProfile()
	switch {
	case w.SchedulerName != nil && *w.SchedulerName != "":
		prof.SchedulerName = *w.SchedulerName
	case w.SchedulerName == nil && only:
		prof.SchedulerName = DefaultSchedulerName // kube names a lone profile
	default:
		b.addf(path+".schedulerName", "required")
	}
	if w.PercentageOfNodesToScore != nil {
		v := b.percentage(*w.PercentageOfNodesToScore, path+".percentageOfNodesToScore")
		prof.PercentageOfNodesToScore = &v
	}
	if w.Plugins != nil {
		def := &prof.Plugins
		for _, pt := range extensionPoints {
			set := pt.wire(w.Plugins)
			sp := path + ".plugins." + pt.yamlName
			b.checkSet(set, sp)
			*pt.runtime(def) = merge(*pt.runtime(def), set)
		}
	}
	seen := map[string]int{}
	for i, pc := range w.PluginConfig {
		if b.exhausted {
			break
		}
		cp := index(path+".pluginConfig", i)
		switch _, known := b.registry[pc.Name]; {
		case pc.Name == "":
			b.addf(cp+".name", "required")
			continue
		case !known:
			b.addf(cp+".name", "%s", b.unknownPlugin(pc.Name))
			continue
		}
		if j, dup := seen[pc.Name]; dup {
			b.addf(cp+".name", "plugin %s already configured at %s", pc.Name, index(path+".pluginConfig", j))
			continue
		}
		seen[pc.Name] = i
		if isNull(&pc.Args) {
			continue // no args: the plugin's defaults
		}
		args, ok := b.decodeArgs(pc.Name, &pc.Args, cp+".args")
		if !ok {
			if pc.Args.Kind != yaml.MappingNode || len(pc.Args.Content) > 0 {
				b.addf(cp+".args", "plugin %s takes no args", pc.Name)
			}
			continue
		}
		if prof.PluginArgs == nil {
			prof.PluginArgs = map[string]any{}
		}
		prof.PluginArgs[pc.Name] = args
	}
	return prof
}

// checkSet checks one extension point's enabled and disabled lists.
func (b *builder) checkSet(set pluginSetV1, path string) {
	seen := map[string]int{}
	for i, pl := range set.Enabled {
		ip := index(path+".enabled", i)
		switch _, known := b.registry[pl.Name]; {
		case pl.Name == "":
			b.addf(ip+".name", "required")
		case pl.Name == "*":
			b.addf(ip+".name", `"*" is only allowed in disabled`)
		case !known:
			b.addf(ip+".name", "%s", b.unknownPlugin(pl.Name))
		default:
			if j, dup := seen[pl.Name]; dup {
				b.addf(ip+".name", "plugin %s already enabled at %s", pl.Name, index(path+".enabled", j))
			}
			seen[pl.Name] = i
		}
		if pl.Weight != nil && (*pl.Weight < 0 || int64(*pl.Weight) > framework.MaxNodeScore) {
			b.addf(ip+".weight", "%d not in valid range [0, %d] (0 means 1)", *pl.Weight, framework.MaxNodeScore)
		}
	}
	for i, pl := range set.Disabled {
		ip := index(path+".disabled", i)
		_, known := b.registry[pl.Name]
		switch {
		case pl.Name == "":
			b.addf(ip+".name", "required")
		case pl.Name == "*" || known || kubePlugins[pl.Name]:
			// Disabling a kube plugin Berth lacks is a no-op, so kube
			// configs that turn off volume plugins load unchanged.
		default:
			b.addf(ip+".name", "%s", b.unknownPlugin(pl.Name))
		}
		if pl.Weight != nil {
			b.addf(ip+".weight", "weight has no meaning for a disabled plugin")
		}
	}
}

func (b *builder) unknownPlugin(name string) string {
	if kubePlugins[name] {
		return fmt.Sprintf("kube-scheduler plugin %q is not implemented by Berth", name)
	}
	known := make([]string, 0, len(b.registry))
	for n := range b.registry {
		known = append(known, n)
	}
	slices.Sort(known)
	return fmt.Sprintf("unknown plugin %q (known: %s)", name, strings.Join(known, ", "))
}

// kubePlugins are kube-scheduler's in-tree plugin names, current and
// removed, for clearer errors about the ones Berth does not register.
var kubePlugins = map[string]bool{
	names.PrioritySort: true, names.DefaultBinder: true, names.DefaultPreemption: true,
	names.DynamicResources: true, names.ImageLocality: true, names.InterPodAffinity: true,
	names.NodeAffinity: true, names.NodeName: true, names.NodePorts: true,
	names.NodeResourcesBalancedAllocation: true, names.NodeResourcesFit: true,
	names.NodeUnschedulable: true, names.PodTopologySpread: true, names.SchedulingGates: true,
	names.TaintToleration: true,
	"VolumeBinding":       true, "VolumeRestrictions": true, "VolumeZone": true, "NodeVolumeLimits": true,
	"EBSLimits": true, "GCEPDLimits": true, "AzureDiskLimits": true, "CinderLimits": true,
	"NodePreferAvoidPods": true, "SelectorSpread": true, "ServiceAffinity": true, "NodeLabel": true,
	"RequestedToCapacityRatio": true, "NodeResourcesLeastAllocated": true, "NodeResourcesMostAllocated": true,
}

// merge applies a file's plugin set to the default one, as kube's
// mergePluginSet: defaults stay in order unless disabled ("*" drops them
// all); an enabled plugin that is also a default replaces it in place
// (taking its weight); the other enabled plugins follow. Disabled names
// are kept, so the framework also leaves them out when it expands
// MultiPoint into this point.
func merge(def runtime.PluginSet, custom pluginSetV1) runtime.PluginSet {
	out := runtime.PluginSet{}
	disabled := map[string]bool{}
	for _, pl := range custom.Disabled {
		out.Disabled = append(out.Disabled, pl.Name)
		disabled[pl.Name] = true
	}
	for _, n := range def.Disabled {
		out.Disabled = append(out.Disabled, n)
		disabled[n] = true
	}
	customAt := map[string]int{}
	for i, pl := range custom.Enabled {
		if _, ok := customAt[pl.Name]; !ok {
			customAt[pl.Name] = i
		}
	}
	replaced := map[int]bool{}
	if !disabled["*"] {
		for _, ref := range def.Enabled {
			if disabled[ref.Name] {
				continue
			}
			if i, ok := customAt[ref.Name]; ok {
				ref = pluginRef(custom.Enabled[i])
				replaced[i] = true
			}
			out.Enabled = append(out.Enabled, ref)
		}
	}
	for i, pl := range custom.Enabled {
		if !replaced[i] {
			out.Enabled = append(out.Enabled, pluginRef(pl))
		}
	}
	return out
}

func pluginRef(pl pluginV1) runtime.PluginRef {
	ref := runtime.PluginRef{Name: pl.Name}
	if pl.Weight != nil {
		ref.Weight = *pl.Weight
	}
	return ref
}

// extensionPoint ties a point's YAML name, its wire set, its runtime set
// and the name ListPlugins uses.
type extensionPoint struct {
	yamlName string
	listName string
	wire     func(*pluginsV1) pluginSetV1
	runtime  func(*runtime.Plugins) *runtime.PluginSet
}

// extensionPoints in kube's order; MultiPoint is last because its list
// names no single point.
var extensionPoints = []extensionPoint{
	{"preEnqueue", "PreEnqueue", func(p *pluginsV1) pluginSetV1 { return p.PreEnqueue }, func(p *runtime.Plugins) *runtime.PluginSet { return &p.PreEnqueue }},
	{"queueSort", "QueueSort", func(p *pluginsV1) pluginSetV1 { return p.QueueSort }, func(p *runtime.Plugins) *runtime.PluginSet { return &p.QueueSort }},
	{"preFilter", "PreFilter", func(p *pluginsV1) pluginSetV1 { return p.PreFilter }, func(p *runtime.Plugins) *runtime.PluginSet { return &p.PreFilter }},
	{"filter", "Filter", func(p *pluginsV1) pluginSetV1 { return p.Filter }, func(p *runtime.Plugins) *runtime.PluginSet { return &p.Filter }},
	{"postFilter", "PostFilter", func(p *pluginsV1) pluginSetV1 { return p.PostFilter }, func(p *runtime.Plugins) *runtime.PluginSet { return &p.PostFilter }},
	{"preScore", "PreScore", func(p *pluginsV1) pluginSetV1 { return p.PreScore }, func(p *runtime.Plugins) *runtime.PluginSet { return &p.PreScore }},
	{"score", "Score", func(p *pluginsV1) pluginSetV1 { return p.Score }, func(p *runtime.Plugins) *runtime.PluginSet { return &p.Score }},
	{"reserve", "Reserve", func(p *pluginsV1) pluginSetV1 { return p.Reserve }, func(p *runtime.Plugins) *runtime.PluginSet { return &p.Reserve }},
	{"permit", "Permit", func(p *pluginsV1) pluginSetV1 { return p.Permit }, func(p *runtime.Plugins) *runtime.PluginSet { return &p.Permit }},
	{"preBind", "PreBind", func(p *pluginsV1) pluginSetV1 { return p.PreBind }, func(p *runtime.Plugins) *runtime.PluginSet { return &p.PreBind }},
	{"bind", "Bind", func(p *pluginsV1) pluginSetV1 { return p.Bind }, func(p *runtime.Plugins) *runtime.PluginSet { return &p.Bind }},
	{"postBind", "PostBind", func(p *pluginsV1) pluginSetV1 { return p.PostBind }, func(p *runtime.Plugins) *runtime.PluginSet { return &p.PostBind }},
	{"multiPoint", "", func(p *pluginsV1) pluginSetV1 { return p.MultiPoint }, func(p *runtime.Plugins) *runtime.PluginSet { return &p.MultiPoint }},
}

// build instantiates every profile as the scheduler will, against an
// empty snapshot. Each plugin is first built alone, so an args error is
// reported at its pluginConfig entry and a plugin enabled at a point it
// does not implement at that entry; then the whole profile is built.
func (b *builder) build(cfg *Config) {
	// Plugin factories may start work tied to ctx; none of it outlives
	// this check.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, queueSort := -1, []string(nil)
	for i, prof := range cfg.Profiles {
		path := b.profilePaths[i]
		w := &b.wire[i]
		if !b.checkPlugins(ctx, prof, w, path) {
			continue
		}
		fwk, err := runtime.NewFramework(ctx, b.registry, prof, runtime.WithSnapshotSharedLister(cache.NewEmptySnapshot()))
		if err != nil {
			b.addf(path, "%v", err)
			continue
		}
		// The scheduler keeps one queue per shard, ordered by the first
		// profile's QueueSort, so every profile must agree (kube too).
		qs := fwk.ListPlugins()["QueueSort"]
		if first < 0 {
			first, queueSort = i, qs
		} else if !slices.Equal(qs, queueSort) {
			b.addf(path+".plugins.queueSort", "queue sort %s differs from %s's %s; all profiles must use the same",
				listOrNone(qs), b.profilePaths[first], listOrNone(queueSort))
		}
	}
}

// checkPlugins builds each plugin the profile names on its own and
// checks it implements the points it is enabled at; it reports whether
// the profile is worth building whole.
func (b *builder) checkPlugins(ctx context.Context, prof *runtime.Profile, w *profileV1, path string) bool {
	ok := true
	points := map[string]map[string]bool{} // plugin -> extension points it implements
	pointsOf := func(name, errPath string) map[string]bool {
		if pts, done := points[name]; done {
			return pts
		}
		alone := &runtime.Profile{
			SchedulerName: prof.SchedulerName,
			Plugins:       runtime.Plugins{MultiPoint: runtime.PluginSet{Enabled: []runtime.PluginRef{{Name: name}}}},
			PluginArgs:    map[string]any{name: prof.PluginArgs[name]},
		}
		fwk, err := runtime.NewFramework(ctx, b.registry, alone, runtime.WithSnapshotSharedLister(cache.NewEmptySnapshot()))
		if err != nil {
			b.addf(errPath, "%v", err)
			ok = false
			points[name] = nil
			return nil
		}
		pts := map[string]bool{}
		for pt := range fwk.ListPlugins() {
			pts[pt] = true
		}
		points[name] = pts
		return pts
	}
	for i, pc := range w.PluginConfig {
		pointsOf(pc.Name, index(path+".pluginConfig", i)+".args")
	}
	if w.Plugins != nil {
		for _, pt := range extensionPoints {
			sp := path + ".plugins." + pt.yamlName
			for i, pl := range pt.wire(w.Plugins).Enabled {
				ip := index(sp+".enabled", i)
				pts := pointsOf(pl.Name, ip)
				if pts != nil && pt.listName != "" && !pts[pt.listName] {
					b.addf(ip+".name", "plugin %s does not implement %s (it implements %s)", pl.Name, pt.yamlName, pointList(pts))
					ok = false
				}
			}
		}
	}
	return ok
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}

func pointList(pts map[string]bool) string {
	var out []string
	for _, pt := range extensionPoints {
		if pts[pt.listName] {
			out = append(out, pt.yamlName)
		}
	}
	if len(out) == 0 {
		return "no extension point"
	}
	return strings.Join(out, ", ")
}
