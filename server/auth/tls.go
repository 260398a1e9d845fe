package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// TLSFiles names the server's TLS material on disk.
type TLSFiles struct {
	// Cert and Key are the server's PEM certificate (chain) and key.
	Cert, Key string
	// ClientCA, when set, is the PEM bundle client certificates must chain
	// to; clients without a certificate may still use a bearer token.
	ClientCA string
}

// tlsMaterial is one consistent load of the files.
type tlsMaterial struct {
	cert *tls.Certificate
	// clientCAs is nil without TLSFiles.ClientCA.
	clientCAs *x509.CertPool
	// gen changes with every load, so verification results cached
	// against an older CA bundle are not reused.
	gen uint64
}

// TLS serves a certificate and client CA bundle that follow the files on
// disk: new handshakes use what was last loaded, open connections keep
// theirs.
type TLS struct {
	files  TLSFiles
	cur    atomic.Pointer[tlsMaterial]
	gen    atomic.Uint64
	poller *poller
}

// LoadTLS loads the files, failing if they do not form a usable key pair
// and CA bundle, and rechecks them every interval (0: the default).
func LoadTLS(files TLSFiles, interval time.Duration, log *zap.Logger) (*TLS, error) {
	if files.Cert == "" || files.Key == "" {
		return nil, errors.New("tls: both a certificate and a key are needed")
	}
	if log == nil {
		log = zap.NewNop()
	}
	t := &TLS{files: files}
	watched := fileSet{files.Cert, files.Key}
	if files.ClientCA != "" {
		watched = append(watched, files.ClientCA)
	}
	var err error
	t.poller, err = startPoller("TLS material", watched, interval, log, t.load)
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (t *TLS) load() error {
	cert, err := tls.LoadX509KeyPair(t.files.Cert, t.files.Key)
	if err != nil {
		return fmt.Errorf("key pair %s, %s: %w", t.files.Cert, t.files.Key, err)
	}
	m := &tlsMaterial{cert: &cert, gen: t.gen.Add(1)}
	if t.files.ClientCA != "" {
		pem, err := os.ReadFile(t.files.ClientCA)
		if err != nil {
			return err
		}
		m.clientCAs = x509.NewCertPool()
		if !m.clientCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("client CA %s: no PEM certificate in it", t.files.ClientCA)
		}
	}
	t.cur.Store(m)
	return nil
}

// Close stops watching the files.
func (t *TLS) Close() { t.poller.close() }

// MutualTLS reports whether clients may authenticate with certificates.
func (t *TLS) MutualTLS() bool { return t.files.ClientCA != "" }

// ServerConfig is a tls.Config for a listener. A client certificate is
// requested but checked by the Authorizer rather than in the handshake, so
// a bad one is answered with codes.Unauthenticated, which says why, instead
// of a connection that fails; a client still proves it holds the key.
func (t *TLS) ServerConfig() *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		m := t.cur.Load()
		c := base.Clone()
		c.GetConfigForClient = nil
		c.Certificates = []tls.Certificate{*m.cert}
		if m.clientCAs != nil {
			c.ClientAuth = tls.RequestClientCert
			c.ClientCAs = m.clientCAs // advertised to clients choosing a cert
		}
		return c, nil
	}
	return base
}

// HTTPConfig is ServerConfig for the metrics listener, where there is no
// interceptor: a client certificate, when a CA is set, is required and
// verified in the handshake.
func (t *TLS) HTTPConfig() *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS12}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		m := t.cur.Load()
		c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*m.cert}}
		if m.clientCAs != nil {
			c.ClientAuth = tls.RequireAndVerifyClientCert
			c.ClientCAs = m.clientCAs
		}
		return c, nil
	}
	return base
}

// clientCAs is the bundle to verify client certificates against.
func (t *TLS) clientCAs() (*x509.CertPool, uint64) {
	m := t.cur.Load()
	return m.clientCAs, m.gen
}
