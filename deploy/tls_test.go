package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/berth-io/berth/server/auth"
)

// berthFlags builds cmd/berth and returns the flags each subcommand's
// --help lists, so the flags the deploy files pass are known to exist.
func berthFlags(t *testing.T, subcommands ...string) map[string]map[string]bool {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not in PATH: cannot build berth")
	}
	bin := filepath.Join(t.TempDir(), "berth")
	if out, err := exec.Command(goBin, "build", "-o", bin, "../cmd/berth").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	flagLine := regexp.MustCompile(`(?m)^\s+-([a-z0-9][a-z0-9-]*)`)
	all := map[string]map[string]bool{}
	for _, sub := range subcommands {
		var out bytes.Buffer
		cmd := exec.Command(bin, sub, "--help")
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("berth %s --help: %v\n%s", sub, err, out.String())
		}
		all[sub] = map[string]bool{}
		for _, m := range flagLine.FindAllStringSubmatch(out.String(), -1) {
			all[sub][m[1]] = true
		}
		if len(all[sub]) == 0 {
			t.Fatalf("berth %s --help lists no flags:\n%s", sub, out.String())
		}
	}
	return all
}

// invocation is a berth command line from a deploy file: the subcommand
// and its flags by name (value "" for a bare flag or one whose value is
// the next argument).
type invocation struct {
	where string
	sub   string
	args  []string
	flags map[string]string
}

func parseInvocation(where string, argv []string) invocation {
	if len(argv) > 0 && path.Base(argv[0]) == "berth" {
		argv = argv[1:]
	}
	inv := invocation{where: where, args: argv, flags: map[string]string{}}
	if len(argv) == 0 {
		return inv
	}
	inv.sub = argv[0]
	for _, a := range argv[1:] {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		inv.flags[name] = value
	}
	return inv
}

// check reports flags the subcommand does not have, and, for serve, a
// missing TLS flag or --insecure.
func (inv invocation) check(t *testing.T, known map[string]map[string]bool, require ...string) {
	t.Helper()
	if known[inv.sub] == nil {
		t.Errorf("%s: berth %q is not a subcommand checked here: %q", inv.where, inv.sub, inv.args)
		return
	}
	for name := range inv.flags {
		if !known[inv.sub][name] {
			t.Errorf("%s: berth %s has no flag --%s", inv.where, inv.sub, name)
		}
	}
	for _, name := range require {
		if _, ok := inv.flags[name]; !ok {
			t.Errorf("%s: berth %s lacks --%s: %q", inv.where, inv.sub, name, inv.args)
		}
	}
	if _, ok := inv.flags["insecure"]; ok {
		t.Errorf("%s: berth %s runs --insecure", inv.where, inv.sub)
	}
}

var serveTLSFlags = []string{"tls-cert", "tls-key", "client-ca"}

// TestDeployServesMutualTLS: every replica that compose, Kubernetes and
// the image start serves mutual TLS with flags berth has, its
// certificates and policy come from read-only mounts, and every probe
// speaks TLS.
func TestDeployServesMutualTLS(t *testing.T) {
	known := berthFlags(t, "serve", "probe", "certs")
	t.Run("compose", func(t *testing.T) { checkComposeTLS(t, known) })
	t.Run("kubernetes", func(t *testing.T) { checkKubernetesTLS(t, known) })
	t.Run("Dockerfile", func(t *testing.T) { checkDockerfileTLS(t, known) })
	t.Run("systemd", func(t *testing.T) { checkSystemdExample(t, known) })
}

// checkSystemdExample: the /etc/default/berth example at the end of the
// unit, whose BERTH_ARGS follow `berth serve`.
func checkSystemdExample(t *testing.T, known map[string]map[string]bool) {
	b, err := os.ReadFile("systemd/berth.service")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)BERTH_ARGS="([^"]*)"`).FindStringSubmatch(string(b))
	if m == nil {
		t.Fatal("no BERTH_ARGS example in systemd/berth.service")
	}
	args := strings.Fields(strings.NewReplacer("#", " ", "\\", " ").Replace(m[1]))
	parseInvocation("systemd BERTH_ARGS", append([]string{"serve"}, args...)).check(t, known, append(serveTLSFlags, "policy")...)
}

func checkComposeTLS(t *testing.T, known map[string]map[string]bool) {
	b, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Command     []string                     `yaml:"command"`
			Volumes     []string                     `yaml:"volumes"`
			DependsOn   map[string]map[string]string `yaml:"depends_on"`
			Healthcheck struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
			Configs []struct{ Source, Target string } `yaml:"configs"`
		} `yaml:"services"`
		Configs map[string]struct{ File string } `yaml:"configs"`
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	certs := parseInvocation("compose certs", compose.Services["certs"].Command)
	certs.check(t, known, "dir", "hosts", "clients")
	if !slices.Contains(compose.Services["certs"].Volumes, "certs:"+certs.flags["dir"]) {
		t.Errorf("the certs service does not write --dir %s to the certs volume: %q", certs.flags["dir"], compose.Services["certs"].Volumes)
	}
	hosts, clients := strings.Split(certs.flags["hosts"], ","), strings.Split(certs.flags["clients"], ",")
	replicas := 0
	for name, svc := range compose.Services {
		if len(svc.Command) == 0 || svc.Command[0] != "serve" {
			continue
		}
		replicas++
		where := "compose " + name
		serve := parseInvocation(where, svc.Command)
		serve.check(t, known, append(serveTLSFlags, "policy")...)
		for _, f := range serveTLSFlags {
			if !strings.HasPrefix(serve.flags[f], "/certs/") {
				t.Errorf("%s: --%s=%s is not in the certs volume", where, f, serve.flags[f])
			}
		}
		if !slices.Contains(svc.Volumes, "certs:/certs:ro") {
			t.Errorf("%s does not mount the certs volume read-only: %q", where, svc.Volumes)
		}
		if svc.DependsOn["certs"]["condition"] != "service_completed_successfully" {
			t.Errorf("%s does not wait for the certs service", where)
		}
		if host, _, _ := strings.Cut(serve.flags["advertise"], ":"); !slices.Contains(hosts, host) {
			t.Errorf("%s advertises %q, which the server certificate (--hosts %q) does not name", where, host, hosts)
		}
		if !slices.ContainsFunc(svc.Configs, func(c struct{ Source, Target string }) bool {
			return c.Target == serve.flags["policy"] && compose.Configs[c.Source].File == "./policy.yaml"
		}) {
			t.Errorf("%s: --policy=%s is not policy.yaml mounted as a config", where, serve.flags["policy"])
		}
		test := svc.Healthcheck.Test
		if len(test) < 2 || test[0] != "CMD" {
			t.Fatalf("%s: healthcheck %q is not an exec of berth probe", where, test)
		}
		probe := parseInvocation(where+" healthcheck", test[1:])
		probe.check(t, known, "cacert", "cert", "key")
		if probe.flags["cacert"] != serve.flags["client-ca"] {
			t.Errorf("%s: the healthcheck trusts %s, not the CA %s", where, probe.flags["cacert"], serve.flags["client-ca"])
		}
		if id := strings.TrimSuffix(path.Base(probe.flags["cert"]), ".crt"); !slices.Contains(clients, id) {
			t.Errorf("%s: the healthcheck's certificate %s is not one the certs service issues (%q)", where, probe.flags["cert"], clients)
		}
	}
	if replicas != 3 {
		t.Errorf("compose runs %d replicas, want 3", replicas)
	}

	grants := policyGrants(t, "policy.yaml")
	if grants["admin"] != "admin" {
		t.Errorf("policy.yaml does not grant admin the admin role: %v", grants)
	}
	for _, c := range clients {
		if c != "admin" && grants[c] != "" {
			t.Errorf("policy.yaml grants %s the role %s; it needs none", c, grants[c])
		}
	}
}

// policyGrants loads a policy the way the replica does and returns its
// identities' roles.
func policyGrants(t *testing.T, file string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return parsedGrants(t, file, b)
}

func parsedGrants(t *testing.T, where string, b []byte) map[string]string {
	t.Helper()
	if _, err := auth.ParsePolicy(b); err != nil {
		t.Fatalf("%s does not load: %v", where, err)
	}
	var p struct {
		Grants []struct{ Identity, Role string } `yaml:"grants"`
	}
	if err := yaml.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range p.Grants {
		out[g.Identity] = g.Role
	}
	return out
}

func checkKubernetesTLS(t *testing.T, known map[string]map[string]bool) {
	objs := k8sObjects(t)
	pod := dig(objs["StatefulSet/berth"], "spec", "template", "spec").(map[string]any)
	container := pod["containers"].([]any)[0].(map[string]any)
	serve := parseInvocation("StatefulSet", toStrings(container["args"]))
	serve.check(t, known, append(serveTLSFlags, "policy")...)

	// Every file a flag names is on a read-only mount of the Secret or
	// ConfigMap that holds it.
	volumes := map[string]map[string]any{}
	for _, v := range pod["volumes"].([]any) {
		v := v.(map[string]any)
		volumes[v["name"].(string)] = v
	}
	mountOf := func(file string) map[string]any {
		for _, m := range container["volumeMounts"].([]any) {
			m := m.(map[string]any)
			if path.Dir(file) == m["mountPath"] {
				if m["readOnly"] != true {
					t.Errorf("%s is mounted writable", m["mountPath"])
				}
				return volumes[m["name"].(string)]
			}
		}
		t.Errorf("no volume is mounted where %s is", file)
		return nil
	}
	for _, f := range serveTLSFlags {
		v := mountOf(serve.flags[f])
		if dig(v, "secret", "secretName") != "berth-tls" {
			t.Errorf("--%s=%s is not from the berth-tls Secret", f, serve.flags[f])
		}
		if base := path.Base(serve.flags[f]); !slices.Contains([]string{"ca.crt", "tls.crt", "tls.key"}, base) {
			t.Errorf("--%s=%s: berth-tls holds ca.crt, tls.crt and tls.key", f, serve.flags[f])
		}
	}
	policy := mountOf(serve.flags["policy"])
	cmName, _ := dig(policy, "configMap", "name").(string)
	cmPolicy, _ := dig(objs["ConfigMap/"+cmName], "data", path.Base(serve.flags["policy"])).(string)
	if cmPolicy == "" {
		t.Fatalf("--policy=%s: no ConfigMap %q holds it", serve.flags["policy"], cmName)
	}
	var fromCM, fromFile any
	_ = yaml.Unmarshal([]byte(cmPolicy), &fromCM)
	b, err := os.ReadFile("policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_ = yaml.Unmarshal(b, &fromFile)
	if parsedGrants(t, "ConfigMap "+cmName, []byte(cmPolicy)); !reflect.DeepEqual(fromCM, fromFile) {
		t.Errorf("ConfigMap %s's policy differs from policy.yaml", cmName)
	}

	for _, probe := range []string{"startupProbe", "readinessProbe", "livenessProbe"} {
		cmd, _ := dig(container, probe, "exec", "command").([]any)
		if cmd == nil {
			t.Errorf("%s is not an exec probe (kubelet's gRPC and HTTPS probes cannot do mutual TLS)", probe)
			continue
		}
		inv := parseInvocation(probe, toStrings(cmd))
		inv.check(t, known, "addr", "cacert")
		if inv.sub != "probe" || inv.flags["cacert"] != serve.flags["client-ca"] {
			t.Errorf("%s: %q is not berth probe trusting %s", probe, inv.args, serve.flags["client-ca"])
		}
		if _, live := inv.flags["live"]; live != (probe == "livenessProbe") {
			t.Errorf("%s: --live only and always on the liveness probe", probe)
		}
	}

	ep := dig(objs["ServiceMonitor/berth"], "spec", "endpoints").([]any)[0]
	if dig(ep, "scheme") != "https" {
		t.Errorf("the ServiceMonitor scrapes %v, want https", dig(ep, "scheme"))
	}
	if dig(ep, "tlsConfig", "ca", "secret", "name") != "berth-tls" || dig(ep, "tlsConfig", "serverName") == nil ||
		dig(ep, "tlsConfig", "cert", "secret", "name") == nil || dig(ep, "tlsConfig", "keySecret", "name") == nil {
		t.Errorf("the ServiceMonitor's tlsConfig needs the CA from berth-tls, a serverName and a client certificate and key: %v", dig(ep, "tlsConfig"))
	}
}

// checkDockerfileTLS: the image's default command and healthcheck.
func checkDockerfileTLS(t *testing.T, known map[string]map[string]bool) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	cmds := regexp.MustCompile(`(?m)^(CMD|HEALTHCHECK .*CMD) (\[.*\])\s*$`).FindAllStringSubmatch(text, -1)
	if len(cmds) != 2 {
		t.Fatalf("want a CMD and a HEALTHCHECK CMD in the Dockerfile, found %d", len(cmds))
	}
	for _, m := range cmds {
		var argv []string
		if err := json.Unmarshal([]byte(m[2]), &argv); err != nil {
			t.Fatalf("Dockerfile %s: %v", m[1], err)
		}
		inv := parseInvocation("Dockerfile "+strings.Fields(m[1])[0], argv)
		if inv.sub == "serve" {
			inv.check(t, known, serveTLSFlags...)
		} else {
			inv.check(t, known, "cacert")
		}
	}
}
