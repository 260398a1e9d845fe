package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/berth-io/berth/replica"
	"github.com/berth-io/berth/server/auth"
)

const certsUsage = `Usage: berth certs [flags]

Makes TLS material for mutual TLS into --dir: a CA (ca.crt, ca.key; an
existing one there is reused), a server certificate (server.crt, server.key)
for localhost, 127.0.0.1, ::1 and --hosts, and one client certificate per
--clients name (<name>.crt, <name>.key; the name is the certificate's common
name, the identity a policy grants roles to; a name with "://" is a URI SAN
instead). Keys are written owner-only.

`

func runCerts(args []string, stdout, stderr io.Writer) error {
	fset := newFlagSet("certs", certsUsage, stderr)
	dir := fset.String("dir", "certs", "output `directory`")
	hosts := fset.String("hosts", "", "extra comma-separated DNS names or IPs for the server certificate")
	clients := fset.String("clients", "", "comma-separated client identities to issue certificates for")
	noServer := fset.Bool("no-server", false, "do not issue a server certificate")
	validFor := fset.Duration("valid-for", 365*24*time.Hour, "validity of the certificates issued (the CA gets ten times this)")
	if err := fset.Parse(args); err != nil {
		return err
	}
	if fset.NArg() > 0 {
		return errors.New("unexpected arguments: " + strings.Join(fset.Args(), " "))
	}
	ca, fresh, err := loadOrMakeCA(*dir, *validFor*10)
	if err != nil {
		return err
	}
	if fresh {
		fmt.Fprintf(stdout, "wrote %s\n", filepath.Join(*dir, "ca.crt"))
	}
	notAfter := time.Now().Add(*validFor)
	if !*noServer {
		req := auth.CertRequest{CommonName: "berth", Server: true, NotAfter: notAfter,
			DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}}
		for _, h := range splitList(*hosts) {
			if ip := net.ParseIP(h); ip != nil {
				req.IPs = append(req.IPs, ip)
			} else {
				req.DNSNames = append(req.DNSNames, h)
			}
		}
		if err := issue(ca, *dir, "server", req, stdout); err != nil {
			return err
		}
	}
	for _, name := range splitList(*clients) {
		req := auth.CertRequest{CommonName: name, Client: true, NotAfter: notAfter}
		file := name
		if strings.Contains(name, "://") {
			u, err := url.Parse(name)
			if err != nil {
				return fmt.Errorf("client %q: %w", name, err)
			}
			req.CommonName, req.URIs = "", []*url.URL{u}
			file = strings.Trim(strings.NewReplacer("://", "-", "/", "-", ":", "-").Replace(name), "-")
		}
		if err := issue(ca, *dir, file, req, stdout); err != nil {
			return err
		}
	}
	return nil
}

func loadOrMakeCA(dir string, validFor time.Duration) (*auth.CA, bool, error) {
	certFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	ca, err := auth.LoadCA(certFile, keyFile)
	if err == nil {
		return ca, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("existing CA in %s: %w", dir, err)
	}
	if ca, err = auth.NewCA("berth CA", validFor); err != nil {
		return nil, false, err
	}
	return ca, true, ca.WriteCA(dir)
}

func issue(ca *auth.CA, dir, name string, req auth.CertRequest, stdout io.Writer) error {
	certPEM, keyPEM, err := ca.Issue(req)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := auth.WriteKeyPair(dir, name, certPEM, keyPEM); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s, %s\n", filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"))
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// securityFlags binds the transport security and access control flags.
func securityFlags(fs *flag.FlagSet, sec *securityOptions) {
	fs.StringVar(&sec.cfg.TLS.Cert, "tls-cert", "", "PEM server certificate: serve gRPC and metrics over TLS (re-read when it changes)")
	fs.StringVar(&sec.cfg.TLS.Key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&sec.cfg.TLS.ClientCA, "client-ca", "", "PEM CA bundle: clients may authenticate with a certificate it signed (mutual TLS)")
	fs.StringVar(&sec.cfg.TokensFile, "tokens", "", `bearer tokens file: lines of "<sha256 hex of token> <identity>"`)
	fs.StringVar(&sec.cfg.JWT.JWKSFile, "jwks", "", "JSON Web Key Set file: accept JWT bearer tokens (e.g. OIDC) signed by its keys (re-read when it changes)")
	fs.StringVar(&sec.cfg.JWT.Issuer, "jwt-issuer", "", "required iss claim of JWTs")
	fs.StringVar(&sec.cfg.JWT.Audience, "jwt-audience", "", "required aud claim of JWTs")
	fs.StringVar(&sec.cfg.JWT.IdentityClaim, "jwt-identity-claim", "sub", "JWT claim that names the identity")
	fs.StringVar(&sec.cfg.PolicyFile, "policy", "", "YAML policy granting roles (admin, orchestrator, observer) and namespaces to identities")
	fs.StringVar(&sec.auditLog, "audit-log", "", `file for the audit log of mutating calls ("-": stderr; default: the main log when auth is on)`)
	fs.BoolVar(&sec.cfg.Insecure, "insecure", false, "allow plaintext on a non-loopback address")
	fs.BoolVar(&sec.cfg.EnablePprof, "enable-pprof", false, "serve /debug/pprof on the metrics listener")
}

type securityOptions struct {
	cfg      replica.Security
	auditLog string
}

// apply sets cfg.Security, opening the audit log's own logger if asked.
// The logger returned (nil if none) is the caller's to sync.
func (o *securityOptions) apply(cfg *replica.Config) (*zap.Logger, error) {
	cfg.Security = o.cfg
	if o.auditLog == "" {
		return nil, nil
	}
	out := "stderr"
	if o.auditLog != "-" {
		// Created owner-only before zap opens it for appending.
		f, err := os.OpenFile(o.auditLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, fmt.Errorf("--audit-log: %w", err)
		}
		f.Close()
		out = o.auditLog
	}
	zc := zap.NewProductionConfig()
	zc.Sampling = nil // an audit log drops nothing
	zc.OutputPaths, zc.ErrorOutputPaths = []string{out}, []string{"stderr"}
	l, err := zc.Build()
	if err != nil {
		return nil, fmt.Errorf("--audit-log: %w", err)
	}
	cfg.Security.Audit = l.Named("audit")
	return l, nil
}
