package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"

	"github.com/golang-jwt/jwt/v5"
)

// JWTConfig accepts bearer tokens that are JWTs signed by a key of a local
// JWKS file (an OIDC provider's keys, fetched by whatever deploys Berth:
// Berth itself makes no outbound calls).
type JWTConfig struct {
	// JWKSFile holds the JSON Web Key Set; empty disables JWTs.
	JWKSFile string
	// Issuer and Audience, when set, must match the iss and aud claims.
	Issuer, Audience string
	// IdentityClaim names the claim that is the identity; default "sub".
	IdentityClaim string
}

// keySet maps a key id to its public key; a key without an id is under "".
type keySet map[string]crypto.PublicKey

type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

func parseJWKS(data []byte) (keySet, error) {
	var doc struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	ks := keySet{}
	for i, k := range doc.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		pub, err := k.publicKey()
		if err != nil {
			return nil, fmt.Errorf("jwks key %d (%q): %w", i, k.Kid, err)
		}
		ks[k.Kid] = pub
	}
	if len(ks) == 0 {
		return nil, errors.New("jwks: no signing key")
	}
	return ks, nil
}

func (k jwk) publicKey() (crypto.PublicKey, error) {
	b64 := base64.RawURLEncoding.DecodeString
	switch k.Kty {
	case "RSA":
		n, err1 := b64(k.N)
		e, err2 := b64(k.E)
		if err := errors.Join(err1, err2); err != nil || len(n) == 0 || len(e) == 0 || len(e) > 4 {
			return nil, fmt.Errorf("bad RSA n or e: %v", err)
		}
		return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}, nil
	case "EC":
		curves := map[string]elliptic.Curve{"P-256": elliptic.P256(), "P-384": elliptic.P384(), "P-521": elliptic.P521()}
		curve, ok := curves[k.Crv]
		if !ok {
			return nil, fmt.Errorf("unsupported curve %q", k.Crv)
		}
		x, err1 := b64(k.X)
		y, err2 := b64(k.Y)
		size := (curve.Params().BitSize + 7) / 8
		if err := errors.Join(err1, err2); err != nil || len(x) != size || len(y) != size {
			return nil, fmt.Errorf("bad EC x or y: %v", err)
		}
		// ParseUncompressedPublicKey checks the point is on the curve.
		return ecdsa.ParseUncompressedPublicKey(curve, append(append([]byte{4}, x...), y...))
	case "OKP":
		x, err := b64(k.X)
		if k.Crv != "Ed25519" || err != nil || len(x) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("bad OKP key (want Ed25519): %v", err)
		}
		return ed25519.PublicKey(x), nil
	}
	return nil, fmt.Errorf("unsupported key type %q", k.Kty)
}

func loadJWKS(path string) (keySet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseJWKS(data)
}

// looksLikeJWT tells a JWT from an opaque token: three dot-separated parts.
func looksLikeJWT(tok string) bool { return strings.Count(tok, ".") == 2 }

// verifyJWT checks the signature, expiry (required), and issuer and
// audience when configured, and returns the identity claim.
func verifyJWT(tok string, ks keySet, cfg JWTConfig) (string, error) {
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}),
		jwt.WithExpirationRequired(),
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(tok, claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		if key, ok := ks[kid]; ok {
			return key, nil
		}
		return nil, fmt.Errorf("no key %q in the JWKS", kid)
	}, opts...)
	if err != nil {
		return "", err
	}
	claim := cfg.IdentityClaim
	if claim == "" {
		claim = "sub"
	}
	id, _ := claims[claim].(string)
	if id == "" {
		return "", fmt.Errorf("no %q claim", claim)
	}
	return id, nil
}
