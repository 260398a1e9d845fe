package store

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
)

// clientPKI locks an embedded etcd's client port: a CA made for this run
// signs the server's certificate and one client certificate, and etcd
// accepts only clients presenting the latter. Without it any local user
// could rewrite Berth's state through the port. The files live in a
// private directory inside the data directory, made afresh at each start
// and removed on Close; the owner can point etcdctl at them. A kill -9
// leaves them beside the data they guard, not in /tmp, and the next start
// replaces them.
type clientPKI struct {
	dir    string
	server transport.TLSInfo
	client *tls.Config
}

// runCA is the throwaway CA of one run's client port.
type runCA struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
	host string
	now  time.Time
}

func newRunCA(host string) (*runCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	// Ten years: the CA and certificates exist only for this process's run.
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "berth embedded etcd CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &runCA{cert: cert, der: der, key: key, host: host, now: now}, nil
}

// issue signs a certificate for the port's host, returning it and its key
// in PEM.
func (ca *runCA) issue(serial int64, name string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: ca.now.Add(-time.Hour), NotAfter: ca.now.AddDate(10, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP(ca.host)}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// clientPKIDir is the certificates' directory under the data directory.
const clientPKIDir = "client-tls"

// newClientPKI makes the run's CA, server and client certificates in a
// fresh private directory under dataDir.
func newClientPKI(dataDir, host string) (_ *clientPKI, err error) {
	dir := filepath.Join(dataDir, clientPKIDir)
	// A crashed run's certificates are stale: its CA signs nothing now.
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	ca, err := newRunCA(host)
	if err != nil {
		return nil, err
	}
	p := &clientPKI{dir: dir}
	write := func(name string, data []byte) (string, error) {
		path := filepath.Join(dir, name)
		return path, os.WriteFile(path, data, 0o600)
	}
	if p.server.TrustedCAFile, err = write("ca.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der})); err != nil {
		return nil, err
	}
	srvCert, srvKey, err := ca.issue(2, "berth embedded etcd", x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	if p.server.CertFile, err = write("server.crt", srvCert); err != nil {
		return nil, err
	}
	if p.server.KeyFile, err = write("server.key", srvKey); err != nil {
		return nil, err
	}
	p.server.ClientCertAuth = true
	cliCert, cliKey, err := ca.issue(3, "berth", x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	if _, err = write("client.crt", cliCert); err != nil {
		return nil, err
	}
	if _, err = write("client.key", cliKey); err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(cliCert, cliKey)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	p.client = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, Certificates: []tls.Certificate{pair}}
	return p, nil
}

func (p *clientPKI) remove() {
	if p != nil {
		os.RemoveAll(p.dir)
	}
}
