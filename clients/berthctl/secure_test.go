package main

import (
	"io"
	"testing"

	"github.com/spf13/pflag"
)

// TestSecureFlags: the environment gives the defaults, flags override
// them, and nothing set means plaintext with no token.
func TestSecureFlags(t *testing.T) {
	env := map[string]string{"BERTH_CACERT": "env-ca", "BERTH_TOKEN": "env-token"}
	var g globals
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.register(fs, func(k string) string { return env[k] })
	if err := fs.Parse([]string{"--token", "flag-token", "--cert", "c.crt", "--key", "c.key"}); err != nil {
		t.Fatal(err)
	}
	if g.cacert != "env-ca" || g.cert != "c.crt" || g.key != "c.key" || g.token != "flag-token" {
		t.Fatalf("got cacert %q cert %q key %q token %q", g.cacert, g.cert, g.key, g.token)
	}
	if _, err := g.dialOptions(); err == nil {
		t.Fatal("missing CA and certificate files were accepted")
	}
	var none globals
	nfs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	none.register(nfs, func(string) string { return "" })
	if opts, err := none.dialOptions(); err != nil || len(opts) != 0 {
		t.Fatalf("no flags: %d options, %v", len(opts), err)
	}
}
