// Package auth decides who may call what on Berth's gRPC front. It names
// the caller (a verified client certificate's URI SAN or common name, or
// a bearer token's identity), looks the name up in a policy of roles and
// namespaces, refuses before the handler runs, filters the bindings watch
// by namespace, and writes one audit line per mutating call. The TLS
// material, tokens and policy are files re-read when they change.
package auth

import (
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Config selects how callers are authenticated and authorized. With
// nothing set every call is let through, as on a developer's loopback.
type Config struct {
	// TLS, when it has a client CA, lets callers authenticate with a
	// certificate signed by it.
	TLS *TLS
	// TokensFile holds hashed bearer tokens (see HashToken): lines of
	// "<sha256 hex> <identity>".
	TokensFile string
	// JWT accepts bearer tokens that are JWTs (OIDC id or access tokens).
	JWT JWTConfig
	// PolicyFile grants roles to identities (see ParsePolicy). Without it
	// every authenticated caller may do everything.
	PolicyFile string
	// PollInterval is how often the files are checked; 0: the default.
	PollInterval time.Duration
	// Audit receives one line per mutating call; nil: none.
	Audit  *zap.Logger
	Logger *zap.Logger
}

// Identity is an authenticated caller.
type Identity struct {
	Name string
	// Via is "certificate", "token" or "jwt".
	Via string
}

// Authorizer checks calls; see the package comment.
type Authorizer struct {
	tls          *TLS
	needIdentity bool
	policy       atomic.Pointer[Policy] // nil without a policy file
	tokens       atomic.Pointer[tokens]
	jwtCfg       JWTConfig
	jwks         atomic.Pointer[keySet]
	pollers      []*poller
	audit        *zap.Logger
	certs        certCache
}

// New loads the files and starts watching them; Close stops that.
func New(cfg Config) (*Authorizer, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	a := &Authorizer{tls: cfg.TLS, audit: cfg.Audit, jwtCfg: cfg.JWT}
	mtls := cfg.TLS != nil && cfg.TLS.MutualTLS()
	a.needIdentity = mtls || cfg.TokensFile != "" || cfg.PolicyFile != "" || cfg.JWT.JWKSFile != ""
	if cfg.PolicyFile != "" && !mtls && cfg.TokensFile == "" && cfg.JWT.JWKSFile == "" {
		return nil, errors.New("a policy needs a way to name callers: a client CA, a tokens file or a JWKS")
	}
	if cfg.JWT.JWKSFile != "" {
		p, err := startPoller("JWKS", fileSet{cfg.JWT.JWKSFile}, cfg.PollInterval, cfg.Logger, func() error {
			ks, err := loadJWKS(cfg.JWT.JWKSFile)
			if err == nil {
				a.jwks.Store(&ks)
			}
			return err
		})
		if err != nil {
			a.Close()
			return nil, err
		}
		a.pollers = append(a.pollers, p)
	}
	if cfg.TokensFile != "" {
		p, err := startPoller("tokens", fileSet{cfg.TokensFile}, cfg.PollInterval, cfg.Logger, func() error {
			t, err := loadTokens(cfg.TokensFile)
			if err == nil {
				a.tokens.Store(&t)
			}
			return err
		})
		if err != nil {
			a.Close()
			return nil, err
		}
		a.pollers = append(a.pollers, p)
	}
	if cfg.PolicyFile != "" {
		p, err := startPoller("policy", fileSet{cfg.PolicyFile}, cfg.PollInterval, cfg.Logger, func() error {
			pol, err := loadPolicy(cfg.PolicyFile)
			if err == nil {
				a.policy.Store(pol)
			}
			return err
		})
		if err != nil {
			a.Close()
			return nil, err
		}
		a.pollers = append(a.pollers, p)
	}
	return a, nil
}

// Close stops watching the files.
func (a *Authorizer) Close() {
	for _, p := range a.pollers {
		p.close()
	}
}

// Enabled reports whether callers must authenticate.
func (a *Authorizer) Enabled() bool { return a.needIdentity }

// Idle reports whether the Authorizer would neither refuse nor audit
// anything, so it can be left out of the chain.
func (a *Authorizer) Idle() bool { return !a.needIdentity && a.audit == nil }

type identityKey struct{}

// IdentityFrom is the caller a handler serves, if authenticated.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// decision is the outcome of a check, kept for the audit line.
type decision struct {
	id    Identity
	grant *Grant // nil: unrestricted
	rule  rule
	known bool
	obj   string
}

func (d decision) mutating() bool { return d.rule.write || !d.known }

// check authenticates the caller and authorizes method on req (nil for a
// stream, whose request is not read yet).
func (a *Authorizer) check(ctx context.Context, method string, req any) (decision, error) {
	d := decision{}
	d.rule, d.known = rules[method]
	// The target is read once, and only when the audit or a namespace
	// check needs it: building it allocates.
	var t target
	haveTarget := d.known && d.rule.target != nil && req != nil
	read := false
	if haveTarget && a.audit != nil && d.rule.write {
		t, read = d.rule.target(req), true
		d.obj = t.object
	}
	if !a.needIdentity || openMethod(method) {
		return d, nil
	}
	id, err := a.identify(ctx)
	if err != nil {
		return d, err
	}
	d.id = id
	pol := a.policy.Load()
	if pol == nil {
		return d, nil
	}
	g := pol.grant(id.Name)
	if g == nil {
		return d, status.Errorf(codes.PermissionDenied, "%s has no grant in the policy", id.Name)
	}
	d.grant = g
	if !g.Role.allows(d.rule, d.known) {
		return d, status.Errorf(codes.PermissionDenied, "%s (%s) may not call %s", id.Name, g.Role, method)
	}
	if !haveTarget || len(g.Namespaces) == 0 {
		return d, nil
	}
	if !read {
		t = d.rule.target(req)
	}
	if t.cluster {
		return d, status.Errorf(codes.PermissionDenied, "%s is limited to namespaces %v; %s is cluster-scoped", id.Name, g.Namespaces, method)
	}
	for _, ns := range t.namespaces {
		if !g.inNamespace(ns) {
			if ns == "" {
				return d, status.Errorf(codes.PermissionDenied, "%s is limited to namespaces %v; name one", id.Name, g.Namespaces)
			}
			return d, status.Errorf(codes.PermissionDenied, "%s may not touch namespace %q", id.Name, ns)
		}
	}
	return d, nil
}

// identify names the caller: a presented bearer token must be valid and
// wins; otherwise the verified client certificate.
func (a *Authorizer) identify(ctx context.Context) (Identity, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if auths := md.Get("authorization"); len(auths) > 0 {
		tok, ok := strings.CutPrefix(auths[0], "Bearer ")
		if !ok || tok == "" {
			return Identity{}, status.Error(codes.Unauthenticated, `authorization metadata must be "Bearer <token>"`)
		}
		if ks := a.jwks.Load(); ks != nil && looksLikeJWT(tok) {
			name, err := verifyJWT(tok, *ks, a.jwtCfg)
			if err != nil {
				return Identity{}, status.Errorf(codes.Unauthenticated, "bearer JWT: %v", err)
			}
			return Identity{Name: name, Via: "jwt"}, nil
		}
		if t := a.tokens.Load(); t != nil {
			if name, ok := t.identity(tok); ok {
				return Identity{Name: name, Via: "token"}, nil
			}
		}
		return Identity{}, status.Error(codes.Unauthenticated, "unknown bearer token")
	}
	if a.tls != nil && a.tls.MutualTLS() {
		if p, ok := peer.FromContext(ctx); ok {
			if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
				pool, gen := a.tls.clientCAs()
				name, err := a.certs.verify(ti.State.PeerCertificates, pool, gen)
				if err != nil {
					return Identity{}, status.Errorf(codes.Unauthenticated, "client certificate: %v", err)
				}
				return Identity{Name: name, Via: "certificate"}, nil
			}
		}
	}
	return Identity{}, status.Error(codes.Unauthenticated, "no credentials: present a client certificate or a bearer token")
}

// certCache remembers verified certificates per connection (the leaf's
// pointer is the connection's), so a busy connection is not re-verified on
// every call; an entry holds until the CA bundle changes or the chain
// expires.
type certCache struct {
	mu      sync.Mutex
	entries map[*x509.Certificate]certEntry
}

type certEntry struct {
	gen      uint64
	name     string
	validTil time.Time
}

// certCacheMax bounds the cache: entries of closed connections are only
// dropped by clearing it.
const certCacheMax = 4096

func (c *certCache) verify(chain []*x509.Certificate, pool *x509.CertPool, gen uint64) (string, error) {
	leaf, now := chain[0], time.Now()
	c.mu.Lock()
	e, ok := c.entries[leaf]
	c.mu.Unlock()
	if ok && e.gen == gen && now.Before(e.validTil) {
		return e.name, nil
	}
	inter := x509.NewCertPool()
	for _, ic := range chain[1:] {
		inter.AddCert(ic)
	}
	verified, err := leaf.Verify(x509.VerifyOptions{
		Roots: pool, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return "", err
	}
	name := certName(leaf)
	if name == "" {
		return "", errors.New("certificate names no identity (no URI SAN, no common name)")
	}
	until := leaf.NotAfter
	for _, ce := range verified[0] {
		if ce.NotAfter.Before(until) {
			until = ce.NotAfter
		}
	}
	c.mu.Lock()
	if c.entries == nil || len(c.entries) >= certCacheMax {
		c.entries = make(map[*x509.Certificate]certEntry)
	}
	c.entries[leaf] = certEntry{gen: gen, name: name, validTil: until}
	c.mu.Unlock()
	return name, nil
}

// certName prefers a URI SAN (e.g. a SPIFFE id) over the common name.
func certName(c *x509.Certificate) string {
	if len(c.URIs) > 0 {
		return c.URIs[0].String()
	}
	return c.Subject.CommonName
}

// Unary checks a call before its handler and audits it after.
func (a *Authorizer) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	d, err := a.check(ctx, info.FullMethod, req)
	if err != nil {
		a.auditCall(d, info.FullMethod, err)
		return nil, err
	}
	if d.id.Name != "" {
		ctx = context.WithValue(ctx, identityKey{}, d.id)
	}
	resp, err := handler(ctx, req)
	a.auditCall(d, info.FullMethod, err)
	return resp, err
}

// Stream checks a stream before its handler; a namespace-limited watcher
// of bindings gets only its namespaces' events.
func (a *Authorizer) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	d, err := a.check(ss.Context(), info.FullMethod, nil)
	if err != nil {
		a.auditCall(d, info.FullMethod, err)
		return err
	}
	if d.grant != nil && info.FullMethod == watchBindings {
		ss = &bindingsFilter{ServerStream: ss, a: a, identity: d.id.Name}
	}
	err = handler(srv, ss)
	a.auditCall(d, info.FullMethod, err)
	return err
}

func (a *Authorizer) auditCall(d decision, method string, err error) {
	if a.audit == nil || !d.mutating() || openMethod(method) {
		return
	}
	st := status.Convert(err)
	fields := []zap.Field{
		zap.String("identity", d.id.Name), zap.String("via", d.id.Via), zap.String("method", method),
		zap.String("object", d.obj), zap.String("code", st.Code().String()),
	}
	if err != nil {
		fields = append(fields, zap.String("error", st.Message()))
	}
	a.audit.Info("call", fields...)
}
