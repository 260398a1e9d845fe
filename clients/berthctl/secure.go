package main

import (
	"flag"

	berth "github.com/berth-io/berth/clients/go"
)

// secureFlags are the transport security flags, etcdctl's names and
// environment variables: with any of --cacert, --cert or --key the
// connection uses TLS; --token sends a bearer token.
type secureFlags struct {
	cacert, cert, key, token string
}

// fromEnv sets the defaults before the flags are parsed.
func (s *secureFlags) fromEnv(getenv func(string) string) {
	*s = secureFlags{cacert: getenv("BERTH_CACERT"), cert: getenv("BERTH_CERT"), key: getenv("BERTH_KEY"), token: getenv("BERTH_TOKEN")}
}

func (s *secureFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.cacert, "cacert", s.cacert, "CA `file` to verify the server with; enables TLS (env BERTH_CACERT)")
	fs.StringVar(&s.cert, "cert", s.cert, "client certificate `file` for mutual TLS (env BERTH_CERT)")
	fs.StringVar(&s.key, "key", s.key, "client key `file` for --cert (env BERTH_KEY)")
	fs.StringVar(&s.token, "token", s.token, "bearer `token` (env BERTH_TOKEN)")
}

// options are the client's dial options for the flags.
func (s *secureFlags) options() ([]berth.Option, error) {
	var opts []berth.Option
	if s.cacert != "" || s.cert != "" || s.key != "" {
		cfg, err := berth.TLSFiles{CACert: s.cacert, Cert: s.cert, Key: s.key}.TLSConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, berth.WithTLS(cfg))
	}
	if s.token != "" {
		opts = append(opts, berth.WithBearerToken(s.token))
	}
	return opts, nil
}
