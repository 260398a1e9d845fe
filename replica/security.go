package replica

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/berth-io/berth/server/auth"
)

// Security configures transport security and access control. The zero
// value is the developer's default: plaintext, everything allowed, which
// Start accepts only on loopback addresses.
type Security struct {
	// TLS serves gRPC (and the metrics listener) over TLS; with ClientCA,
	// callers may authenticate with certificates. Files are re-read when
	// they change.
	TLS auth.TLSFiles
	// TokensFile and PolicyFile: see auth.Config.
	TokensFile, PolicyFile string
	// JWT accepts JWT bearer tokens signed by a key of a local JWKS file.
	JWT auth.JWTConfig
	// Audit receives one line per mutating call. Default: the replica's
	// logger named "audit" when callers must authenticate, else none.
	Audit *zap.Logger
	// Insecure allows plaintext on addresses other than loopback.
	Insecure bool
	// EnablePprof serves /debug/pprof on the metrics listener.
	EnablePprof bool
	// PollInterval is how often the files are checked; 0: auth's default.
	PollInterval time.Duration
}

// security is the loaded material.
type security struct {
	tls  *auth.TLS        // nil: plaintext
	auth *auth.Authorizer // nil: everything allowed, nothing audited
}

func (s *security) close() {
	if s.auth != nil {
		s.auth.Close()
	}
	if s.tls != nil {
		s.tls.Close()
	}
}

func (s *security) grpcTLS() *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.ServerConfig()
}

func (s *security) httpTLS() *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.HTTPConfig()
}

// loadSecurity loads the files and refuses plaintext on an address other
// programs can reach, unless told it is wanted.
func loadSecurity(cfg Config) (*security, error) {
	sc, log := cfg.Security, cfg.Logger
	s := &security{}
	if sc.TLS.Cert != "" || sc.TLS.Key != "" || sc.TLS.ClientCA != "" {
		var err error
		if s.tls, err = auth.LoadTLS(sc.TLS, sc.PollInterval, log.Named("tls")); err != nil {
			return nil, err
		}
	} else {
		for _, addr := range []string{cfg.Listen, cfg.MetricsListen} {
			if addr == "-" || isLoopback(addr) {
				continue
			}
			if !sc.Insecure {
				return nil, fmt.Errorf("refusing to serve plaintext on %s, which is not a loopback address: give --tls-cert and --tls-key, or --insecure", addr)
			}
			log.Warn("INSECURE: serving plaintext on a non-loopback address; anyone who can reach it can read and change the cluster", zap.String("addr", addr))
		}
	}
	audit := sc.Audit
	if audit == nil && (sc.TLS.ClientCA != "" || sc.TokensFile != "" || sc.PolicyFile != "" || sc.JWT.JWKSFile != "") {
		audit = log.Named("audit")
	}
	var err error
	s.auth, err = auth.New(auth.Config{
		TLS: s.tls, TokensFile: sc.TokensFile, PolicyFile: sc.PolicyFile, JWT: sc.JWT, PollInterval: sc.PollInterval,
		Logger: log.Named("auth"), Audit: audit,
	})
	if err != nil {
		s.close()
		return nil, err
	}
	if !s.auth.Enabled() && !sc.Insecure && !isLoopback(cfg.Listen) {
		log.Warn("no client authentication: anyone who can reach the gRPC port can read and change the cluster; give --client-ca or --tokens")
	}
	if s.auth.Idle() {
		// The developer's default: no interceptor, no cost per call.
		s.auth.Close()
		s.auth = nil
	}
	return s, nil
}

// isLoopback reports whether addr's host only accepts local connections.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
