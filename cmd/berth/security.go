package main

import (
	"flag"
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/berth-io/berth/replica"
)

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
