package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-io/berth/replica"
)

// lockedLog collects a child's stderr lines as they come.
type lockedLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lockedLog) add(s string) {
	l.mu.Lock()
	l.lines = append(l.lines, s)
	l.mu.Unlock()
}

func (l *lockedLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func (l *lockedLog) has(msg string) bool {
	for _, line := range l.snapshot() {
		if strings.Contains(line, `"msg":"`+msg+`"`) {
			return true
		}
	}
	return false
}

// A clean start and stop of berth serve, as a real process, logs no
// error, ISO 8601 times, and one line per phase of its life.
func TestServeLogsCleanStartAndStop(t *testing.T) {
	cmd := exec.Command(os.Args[0], "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "-",
		"--data-dir", t.TempDir())
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log lockedLog
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			log.add(sc.Text())
		}
		exited <- cmd.Wait()
	}()
	defer func() {
		if t.Failed() {
			t.Logf("berth serve stderr:\n%s", strings.Join(log.snapshot(), "\n"))
		}
	}()

	deadline := time.Now().Add(90 * time.Second)
	for !log.has("health: serving") {
		select {
		case err := <-exited:
			t.Fatalf("berth serve exited before serving: %v", err)
		case <-time.After(50 * time.Millisecond): // poll interval
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			t.Fatal("berth serve not serving after 90s")
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("berth serve after SIGTERM: %v; want exit 0", err)
		}
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatal("berth serve still running 90s after SIGTERM")
	}

	var errorLines []string
	for _, line := range log.snapshot() {
		var entry struct {
			Level string `json:"level"`
			TS    string `json:"ts"`
		}
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("not a JSON log line: %q", line)
			continue
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000Z0700", entry.TS); err != nil {
			t.Errorf("ts %q is not ISO 8601: %v", entry.TS, err)
		}
		if entry.Level == "error" {
			errorLines = append(errorLines, line)
		}
	}
	if len(errorLines) != 0 {
		t.Errorf("%d error lines over a clean start and stop:\n%s", len(errorLines), strings.Join(errorLines, "\n"))
	}
	for _, phase := range []string{"starting embedded etcd", "store open", "scheduler started", "berth serving", "berth draining", "berth stopped"} {
		if !log.has(phase) {
			t.Errorf("no %q line", phase)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
			t.Errorf("berth %s: exit %d, stderr %q", args[0], code, stderr.String())
		}
		out := stdout.String()
		if !strings.HasPrefix(out, "berth ") || !strings.Contains(out, "go: go1.") {
			t.Errorf("berth %s printed %q; want the module version and the Go version", args[0], out)
		}
	}
}

func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"serve", "--help"}, {"serve", "-h"}, {"bench", "--help"}, {"load", "--help"}, {"etcd", "--help"}} {
		var stderr bytes.Buffer
		if code := run(context.Background(), args, io.Discard, &stderr); code != 0 {
			t.Errorf("berth %s: exit %d, want 0", strings.Join(args, " "), code)
		}
		if !strings.Contains(stderr.String(), "Usage") {
			t.Errorf("berth %s printed no usage: %q", strings.Join(args, " "), stderr.String())
		}
	}
	if code := run(context.Background(), []string{"serve", "--no-such-flag"}, io.Discard, io.Discard); code == 0 {
		t.Error("berth serve --no-such-flag: exit 0, want failure")
	}
}

func TestServeEtcdAndAdvertiseFlags(t *testing.T) {
	for _, tc := range []struct {
		args                []string
		wantClient, wantAdv string
		wantErr             bool
		wantNoSnapshot      bool
	}{
		{args: nil, wantClient: "127.0.0.1:0"},
		{args: []string{"--etcd-listen-client", "0.0.0.0:2379"}, wantClient: "0.0.0.0:2379"},
		{args: []string{"--etcd-listen-client", "http://127.0.0.1:2379"}, wantClient: "127.0.0.1:2379"},
		{args: []string{"--etcd-listen-client", "https://127.0.0.1:2379"}, wantErr: true},
		{args: []string{"--etcd-listen-client", "2379"}, wantErr: true},
		{args: []string{"--advertise", "berth-0.berth:7070"}, wantClient: "127.0.0.1:0", wantAdv: "berth-0.berth:7070"},
		{args: []string{"--startup-snapshot=false"}, wantClient: "127.0.0.1:0", wantNoSnapshot: true},
		{args: []string{"--startup-snapshot"}, wantClient: "127.0.0.1:0"},
	} {
		var cfg replica.Config
		var logLevel, endpoints string
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		serveFlags(fs, &cfg, &logLevel, &endpoints)
		err := fs.Parse(tc.args)
		if tc.wantErr {
			if err == nil {
				t.Errorf("%v: parsed; want an error", tc.args)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if cfg.DisableStartupSnapshot != tc.wantNoSnapshot {
			t.Errorf("%v: DisableStartupSnapshot %v, want %v", tc.args, cfg.DisableStartupSnapshot, tc.wantNoSnapshot)
		}
		if cfg.Embedded.ClientAddr != tc.wantClient || cfg.Advertise != tc.wantAdv {
			t.Errorf("%v: client %q advertise %q; want %q, %q", tc.args, cfg.Embedded.ClientAddr, cfg.Advertise, tc.wantClient, tc.wantAdv)
		}
	}
}
