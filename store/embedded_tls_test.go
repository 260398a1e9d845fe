package store

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEmbeddedClientCertAuth: with ClientCertAuth the client port admits
// only the certificate made for the run, maintenance still works through
// it, and the certificates live in the data dir, replacing a crashed
// run's, and are gone after Close.
func TestEmbeddedClientCertAuth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dataDir := t.TempDir()
	// What a kill -9 leaves: the last run's certificates.
	stale := filepath.Join(dataDir, clientPKIDir, "ca.crt")
	if err := os.MkdirAll(filepath.Dir(stale), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := StartEmbedded(ctx, EmbeddedConfig{Dir: dataDir, ClientCertAuth: true, Maintenance: MaintenanceConfig{Interval: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if b, err := os.ReadFile(stale); err != nil || string(b) == "stale" {
		t.Fatalf("the crashed run's CA was kept (err %v)", err)
	}
	put := func(tlsCfg *tls.Config) error {
		c, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints(), TLS: tlsCfg, DialTimeout: 2 * time.Second})
		if err != nil {
			return err
		}
		defer c.Close()
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		defer ccancel()
		_, err = c.Put(cctx, "k", "v")
		return err
	}
	if err := put(e.ClientTLS()); err != nil {
		t.Fatalf("with the run's client certificate: %v", err)
	}
	noCert := e.ClientTLS()
	noCert.Certificates = nil
	if err := put(noCert); err == nil {
		t.Fatal("a client without a certificate wrote to the embedded etcd")
	}
	if err := put(nil); err == nil {
		t.Fatal("a plaintext client wrote to the embedded etcd")
	}
	dir := e.ClientTLSDir()
	if filepath.Dir(dir) != dataDir {
		t.Fatalf("certificate dir %s is outside the data dir %s", dir, dataDir)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("certificate dir %s: %v %v, want owner-only", dir, st.Mode(), err)
	}
	e.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("certificate dir left after Close: %v", err)
	}
}
