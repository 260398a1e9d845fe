package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/clients/go/berthtest"
)

// invokeStdin is invoke with input on stdin, for -f -.
func invokeStdin(t *testing.T, srv *berthtest.Server, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	c := &cli{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut, getenv: func(k string) string {
		if k == "BERTH_ENDPOINTS" {
			return srv.Addr
		}
		return ""
	}}
	code = c.run(t.Context(), args)
	return code, out.String(), errOut.String()
}

func TestRoundTripGetThenApply(t *testing.T) {
	srv := berthtest.Start(t)
	mustInvoke(t, srv, "node", "add", "n1", "--cpu", "64", "--memory", "256Gi", "--resource", "example.com/gpu=8", "--label", "zone=a")
	podFile := "name: web\nnamespace: shop\ncontainers:\n- name: main\n  requests: {cpu: 500m, memory: 256Mi}\noverhead: {cpu: \"1.5\"}\n"
	if code, _, errOut := invokeStdin(t, srv, podFile, "pod", "submit", "-f", "-"); code != exitOK {
		t.Fatalf("pod submit -f -: exit %d: %s", code, errOut)
	}

	for _, tt := range []struct {
		get, apply []string
		want       []string // in the first output
	}{
		{get: []string{"pod", "get", "web", "-n", "shop"}, apply: []string{"pod", "submit", "-f", "-"},
			want: []string{"cpu: 500m", "memory: 256Mi", "cpu: 1500m"}},
		{get: []string{"node", "get", "n1"}, apply: []string{"node", "add", "-f", "-"},
			want: []string{`cpu: "64"`, "memory: 256Gi", `example.com/gpu: "8"`}},
	} {
		for _, format := range []string{"yaml", "json"} {
			t.Run(strings.Join(tt.get[:2], " ")+" "+format, func(t *testing.T) {
				before := mustInvoke(t, srv, append(tt.get, "-o", format)...)
				if format == "yaml" {
					for _, s := range tt.want {
						if !strings.Contains(before, s) {
							t.Errorf("-o yaml lacks %q:\n%s", s, before)
						}
					}
				}
				if code, _, errOut := invokeStdin(t, srv, before, tt.apply...); code != exitOK {
					t.Fatalf("%v of -o %s output: exit %d: %s", tt.apply, format, code, errOut)
				}
				after := mustInvoke(t, srv, append(tt.get, "-o", format)...)
				if diff := cmp.Diff(before, after); diff != "" {
					t.Errorf("get | apply changed the object (-before,+after):\n%s", diff)
				}
			})
		}
	}
}

func TestSelector(t *testing.T) {
	labels := map[string]string{"app": "web", "tier": "front", "env": "prod"}
	tests := []struct {
		sel     string
		want    bool
		wantErr bool
	}{
		{sel: "", want: true},
		{sel: "app=web", want: true},
		{sel: "app==web", want: true},
		{sel: "app=web,tier!=db", want: true},
		{sel: "app=web,tier!=front", want: false},
		{sel: "missing!=x", want: true},
		{sel: "env in (a,prod)", want: true},
		{sel: "env in (a, b)", want: false},
		{sel: "env notin (a,b),app", want: true},
		{sel: "missing notin (a)", want: true},
		{sel: "missing in (a)", want: false},
		{sel: "app", want: true},
		{sel: "!app", want: false},
		{sel: "!gpu, env=prod", want: true},
		{sel: "example.com/team=x", want: false},
		{sel: "app=web,", wantErr: true},
		{sel: "env in (a", wantErr: true},
		{sel: "=web", wantErr: true},
		{sel: "app=w=b", wantErr: true},
		{sel: "env within (a)", wantErr: true},
	}
	for _, tt := range tests {
		sel, err := parseSelector(tt.sel)
		if (err != nil) != tt.wantErr {
			t.Errorf("parseSelector(%q) error = %v, wantErr %v", tt.sel, err, tt.wantErr)
			continue
		}
		if err == nil && sel.matches(labels) != tt.want {
			t.Errorf("%q matches %v = %v, want %v", tt.sel, labels, !tt.want, tt.want)
		}
	}
}

func TestListAndDeleteBySelector(t *testing.T) {
	srv := berthtest.Start(t)
	for _, p := range []struct{ ns, name, labels string }{
		{"a", "web-1", "app=web"}, {"a", "web-2", "app=web"}, {"a", "db", "app=db"}, {"b", "web-3", "app=web"}, {"a", "bare", ""},
	} {
		args := []string{"pod", "submit", p.name, "-n", p.ns}
		if p.labels != "" {
			args = append(args, "--label", p.labels)
		}
		mustInvoke(t, srv, args...)
	}
	names := func(table string) []string {
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
			f := strings.Fields(line)
			got = append(got, f[0]+"/"+f[1])
		}
		return got
	}

	out := mustInvoke(t, srv, "pod", "list", "-A", "-l", "app=web")
	if diff := cmp.Diff([]string{"a/web-1", "a/web-2", "b/web-3"}, names(out)); diff != "" {
		t.Errorf("pod list -A -l app=web (-want,+got):\n%s", diff)
	}
	out = mustInvoke(t, srv, "pod", "list", "-n", "a", "-l", "app notin (web)", "-o", "wide")
	if diff := cmp.Diff([]string{"a/bare", "a/db"}, names(out)); diff != "" {
		t.Errorf("pod list -l 'app notin (web)' (-want,+got):\n%s", diff)
	}
	if !strings.Contains(out, "LABELS") || !strings.Contains(out, "app=db") {
		t.Errorf("-o wide lacks the labels column:\n%s", out)
	}

	out = mustInvoke(t, srv, "pod", "delete", "-n", "a", "-l", "app=web")
	if !strings.Contains(out, "pod/a/web-1 deleted") || !strings.Contains(out, "pod/a/web-2 deleted") || strings.Count(out, "deleted") != 2 {
		t.Errorf("pod delete -l app=web printed:\n%s", out)
	}
	out = mustInvoke(t, srv, "pod", "list")
	if diff := cmp.Diff([]string{"a/bare", "a/db", "b/web-3"}, names(out)); diff != "" {
		t.Errorf("pods after delete -l (-want,+got):\n%s", diff)
	}
	mustInvoke(t, srv, "pod", "delete", "--all", "-n", "a")
	out = mustInvoke(t, srv, "pod", "list")
	if diff := cmp.Diff([]string{"b/web-3"}, names(out)); diff != "" {
		t.Errorf("pods after delete --all -n a (-want,+got):\n%s", diff)
	}

	for _, args := range [][]string{
		{"pod", "delete", "x", "-l", "app=web"},
		{"pod", "delete", "-l", "app=web", "--all"},
		{"pod", "delete", "-l", "app in (web"},
		{"pod", "list", "-A", "-n", "a"},
	} {
		if code, _, errOut := invoke(t, srv, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d; stderr %s", args, code, exitUsage, errOut)
		}
	}
}

func TestConventions(t *testing.T) {
	srv := berthtest.Start(t)
	for _, n := range []string{"cpu-1", "gpu-1", "gpu-2"} {
		mustInvoke(t, srv, "node", "add", n)
	}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr []string
	}{
		{name: "suggestion", args: []string{"pod", "lst"}, wantCode: exitUsage,
			wantStderr: []string{`unknown command "pod lst"`, "Did you mean this?", "list"}},
		{name: "top-level suggestion", args: []string{"nod"}, wantCode: exitUsage, wantStderr: []string{"node"}},
		{name: "bash completion", args: []string{"completion", "bash"}, wantCode: exitOK, wantStdout: []string{"berthctl", "complete"}},
		{name: "zsh completion", args: []string{"completion", "zsh"}, wantCode: exitOK, wantStdout: []string{"#compdef berthctl"}},
		{name: "dynamic completion of commands", args: []string{"__complete", "pod", "l"}, wantCode: exitOK, wantStdout: []string{"list"}},
		{name: "completion of -o", args: []string{"__complete", "node", "list", "-o", ""}, wantCode: exitOK, wantStdout: []string{"wide", "yaml"}},
		{name: "completion of names", args: []string{"__complete", "node", "get", "gp"}, wantCode: exitOK, wantStdout: []string{"gpu-1\n", "gpu-2\n"}},
		{name: "long flag after one dash", args: []string{"node", "list", "-o", "json", "-timeout", "5s", "-limit", "1"}, wantCode: exitOK, wantStdout: []string{`"name": "cpu-1"`}},
		{name: "version", args: []string{"version"}, wantCode: exitOK, wantStdout: []string{"berthctl ", "go:", "go1."}},
		{name: "group without subcommand", args: []string{"pod"}, wantCode: exitUsage, wantStderr: []string{"pod submit"}},
		{name: "token without TLS", args: []string{"node", "list", "--token", "t"}, wantCode: exitUsage, wantStderr: []string{"--token needs TLS"}},
		{name: "missing CA file", args: []string{"node", "list", "--cacert", "testdata/none.pem"}, wantCode: exitUsage, wantStderr: []string{"--cacert"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := invoke(t, srv, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, errOut)
			}
			for _, s := range tt.wantStdout {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%.500s", s, out)
				}
			}
			for _, s := range tt.wantStderr {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
		})
	}
}

func TestEndpoints(t *testing.T) {
	srv := berthtest.Start(t)
	// The first endpoint refuses connections; the second serves.
	dead := "127.0.0.1:1"
	out := mustInvoke(t, srv, "--endpoints", dead+","+srv.Addr, "node", "add", "n1")
	if !strings.Contains(out, "node/n1 upserted") {
		t.Errorf("node add over --endpoints printed %q", out)
	}
	code, out, errOut := invokeStdin(t, srv, "", "node", "list") // BERTH_ENDPOINTS
	if code != exitOK || !slices.Contains(strings.Fields(out), "n1") {
		t.Errorf("node list with BERTH_ENDPOINTS: exit %d, %q, %q", code, out, errOut)
	}
}
