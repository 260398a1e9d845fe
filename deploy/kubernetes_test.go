package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/berth-io/berth/scheduler/config"
)

// k8sObjects decodes every document of every manifest in deploy/kubernetes.
func k8sObjects(t *testing.T) map[string]map[string]any {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	objs := map[string]map[string]any{} // "Kind/name" -> object
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var obj map[string]any
			err := dec.Decode(&obj)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			kind, _ := obj["kind"].(string)
			meta, _ := obj["metadata"].(map[string]any)
			name, _ := meta["name"].(string)
			if obj["apiVersion"] == nil || kind == "" || (name == "" && kind != "Kustomization") {
				t.Errorf("%s: a document lacks apiVersion, kind or metadata.name", f)
			}
			objs[kind+"/"+name] = obj
		}
	}
	return objs
}

// TestKubernetesManifests checks what would otherwise show only on a
// cluster: the kustomization lists every file, the scheduler ConfigMap
// loads, and the PrometheusRule carries the same rules as alerts.yaml.
func TestKubernetesManifests(t *testing.T) {
	objs := k8sObjects(t)
	for _, want := range []string{"StatefulSet/berth", "Service/berth", "Service/berth-headless", "ConfigMap/berth-scheduler", "ConfigMap/berth-policy",
		"PodDisruptionBudget/berth", "ServiceMonitor/berth", "PrometheusRule/berth", "Kustomization/"} {
		if objs[want] == nil {
			t.Errorf("no %s in deploy/kubernetes", want)
		}
	}

	listed := map[string]bool{}
	for _, r := range objs["Kustomization/"]["resources"].([]any) {
		listed[r.(string)] = true
	}
	files, _ := filepath.Glob("kubernetes/*.yaml")
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" && !listed[base] {
			t.Errorf("%s is not in kustomization.yaml's resources", base)
		}
	}

	sched, _ := objs["ConfigMap/berth-scheduler"]["data"].(map[string]any)["scheduler.yaml"].(string)
	if _, err := config.Parse([]byte(sched)); err != nil {
		t.Errorf("ConfigMap berth-scheduler: scheduler.yaml does not load: %v", err)
	}

	b, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	var alerts map[string]any
	if err := yaml.Unmarshal(b, &alerts); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(alerts, objs["PrometheusRule/berth"]["spec"]) {
		t.Errorf("kubernetes/prometheusrule.yaml's spec differs from %s: copy the groups over", alertsPath)
	}

	// The replicas' args name the mounted config, and both probes the
	// health service needs are there: exec probes of berth probe, as the
	// port speaks TLS (TestDeployServesMutualTLS checks their flags).
	sts := objs["StatefulSet/berth"]
	container := dig(sts, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
	args := strings.Join(toStrings(container["args"]), " ")
	for _, want := range []string{"--config=/etc/berth/scheduler.yaml", "--etcd-endpoints=", "--replica-id=$(POD_NAME)", "--advertise="} {
		if !strings.Contains(args, want) {
			t.Errorf("StatefulSet args lack %s: %s", want, args)
		}
	}
	for _, probe := range []string{"startupProbe", "readinessProbe"} {
		cmd, _ := dig(container, probe, "exec", "command").([]any)
		if cmd == nil || !slices.Contains(toStrings(cmd), "probe") || !slices.Contains(toStrings(cmd), "--addr=127.0.0.1:7070") {
			t.Errorf("%s is not a berth probe of port 7070: %v", probe, cmd)
		}
	}
}

func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func toStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// TestKustomizeBuilds renders the kustomization where kubectl is
// installed: names, labels and the image rewrite must resolve.
func TestKustomizeBuilds(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	out, err := exec.Command(kubectl, "kustomize", "kubernetes").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("namespace: berth")) || !bytes.Contains(out, []byte("image: registry.example/berth:latest")) {
		t.Errorf("rendered manifests lack the namespace or the image rewrite:\n%s", out)
	}
}
