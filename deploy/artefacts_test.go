package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadRules(path string) ([]rule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rf ruleFile
	dec := yaml.NewDecoder(bytesReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&rf); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var rules []rule
	for _, g := range rf.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules, nil
}

var alertName = regexp.MustCompile(`^Berth[A-Z][A-Za-z0-9]+$`)

// TestAlertRules checks what promtool cannot know (our naming, severity
// and annotation conventions), and runs promtool too where it is
// installed (`make test` installs it when it can).
func TestAlertRules(t *testing.T) {
	rules, err := loadRules(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) == 0 {
		t.Fatal("no rules")
	}
	seen := map[string]bool{}
	for _, r := range rules {
		if r.Record != "" || !alertName.MatchString(r.Alert) {
			t.Errorf("rule %q/%q: want only alerts, named Berth<CamelCase>", r.Alert, r.Record)
		}
		if seen[r.Alert] {
			t.Errorf("alert %s defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if r.For != "" {
			if d, err := time.ParseDuration(r.For); err != nil || d <= 0 {
				t.Errorf("%s: for %q is not a positive duration", r.Alert, r.For)
			}
		}
		switch r.Labels["severity"] {
		case "critical", "warning", "info":
		default:
			t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, r.Labels["severity"])
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: needs annotations summary and description", r.Alert)
		}
		if _, err := seriesNames(r.Expr); err != nil {
			t.Errorf("%s: %v", r.Alert, err)
		}
	}

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not installed: the rules were checked structurally only")
		return
	}
	for _, args := range [][]string{{"check", "rules", alertsPath}, {"test", "rules", alertsTestPath}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}

const alertsTestPath = "prometheus/alerts_test.yaml"

// TestDashboardShape checks what Grafana needs to import the dashboard
// anywhere: unique panel ids, a position for each, and the data source
// taken from the variable rather than one Prometheus of ours.
func TestDashboardShape(t *testing.T) {
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Title  string `json:"title"`
		Panels []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Title      string `json:"title"`
			GridPos    *struct{ H, W, X, Y int }
			Datasource *struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard needs a uid, a title and panels")
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Title == "" || p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %d %q: needs a title and a gridPos within 24 columns", p.ID, p.Title)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: data source must be ${datasource}", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
	}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// TestDashboardQueriesParse hands every dashboard query to promtool as a
// recording rule, Grafana's variables filled in, so a query Prometheus
// would reject fails here rather than as an empty panel.
func TestDashboardQueriesParse(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed")
	}
	exprs, err := dashboardExprs(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	grafana := strings.NewReplacer("$__rate_interval", "5m", "$job", "berth", "$instance", ".*")
	type recording struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []recording
	for i, e := range exprs {
		rules = append(rules, recording{fmt.Sprintf("dashboard:query_%d", i), grafana.Replace(e.expr)})
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("promtool rejects a dashboard query: %v\n%s", err, out)
	}
}
