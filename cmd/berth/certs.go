package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

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
