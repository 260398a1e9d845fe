package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCerts: the CA signs the server and client certificates, for the
// names asked, keys are owner-only, and a second run reuses the CA.
func TestCerts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	var out, errb bytes.Buffer
	if err := runCerts([]string{"--dir", dir, "--hosts", "berth.example,10.0.0.7", "--clients", "admin,orch-a"}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	ca := readCert(t, filepath.Join(dir, "ca.crt"))
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	srv := readCert(t, filepath.Join(dir, "server.crt"))
	for _, host := range []string{"localhost", "127.0.0.1", "berth.example", "10.0.0.7"} {
		if _, err := srv.Verify(x509.VerifyOptions{Roots: roots, DNSName: host}); err != nil {
			t.Errorf("server certificate for %s: %v", host, err)
		}
	}
	for _, name := range []string{"admin", "orch-a"} {
		c := readCert(t, filepath.Join(dir, name+".crt"))
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil || c.Subject.CommonName != name {
			t.Errorf("client %s: CN %q, %v", name, c.Subject.CommonName, err)
		}
		st, err := os.Stat(filepath.Join(dir, name+".key"))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s.key: %v %v, want 0600", name, st.Mode(), err)
		}
	}
	if err := runCerts([]string{"--dir", dir, "--no-server", "--clients", "spiffe://x/obs"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if again := readCert(t, filepath.Join(dir, "ca.crt")); !again.Equal(ca) {
		t.Fatal("a second run replaced the CA")
	}
	if c := readCert(t, filepath.Join(dir, "spiffe-x-obs.crt")); len(c.URIs) != 1 || c.URIs[0].String() != "spiffe://x/obs" {
		t.Fatalf("URI client: %v", c.URIs)
	}
}
