package main

import (
	"flag"
	"io"
	"testing"
)

// TestSecureFlags: the environment gives the defaults, flags override
// them, and nothing set means plaintext with no token.
func TestSecureFlags(t *testing.T) {
	env := map[string]string{"BERTH_CACERT": "env-ca", "BERTH_TOKEN": "env-token"}
	var s secureFlags
	s.fromEnv(func(k string) string { return env[k] })
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	s.register(fs)
	if err := fs.Parse([]string{"--token", "flag-token", "--cert", "c.crt", "--key", "c.key"}); err != nil {
		t.Fatal(err)
	}
	want := secureFlags{cacert: "env-ca", cert: "c.crt", key: "c.key", token: "flag-token"}
	if s != want {
		t.Fatalf("got %+v, want %+v", s, want)
	}
	if _, err := s.options(); err == nil {
		t.Fatal("missing CA and certificate files were accepted")
	}
	var none secureFlags
	none.fromEnv(func(string) string { return "" })
	if opts, err := none.options(); err != nil || len(opts) != 0 {
		t.Fatalf("no flags: %d options, %v", len(opts), err)
	}
	tokenOnly := secureFlags{token: "t"}
	if opts, err := tokenOnly.options(); err != nil || len(opts) != 1 {
		t.Fatalf("token only: %d options, %v", len(opts), err)
	}
}
