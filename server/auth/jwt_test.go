package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func jwksOf(t *testing.T, rsaKey *rsa.PrivateKey, ecKey *ecdsa.PrivateKey) string {
	t.Helper()
	ecPub, err := ecKey.PublicKey.Bytes() // 0x04 || x || y
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]any{"keys": []map[string]string{
		{"kty": "RSA", "kid": "r1", "use": "sig", "n": b64(rsaKey.N.Bytes()), "e": b64(big.NewInt(int64(rsaKey.E)).Bytes())},
		{"kty": "EC", "kid": "e1", "crv": "P-256", "x": b64(ecPub[1:33]), "y": b64(ecPub[33:])},
	}}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestJWTBearer: JWTs signed by a JWKS key name the caller by their sub;
// expired, wrongly addressed, or signed by an unknown key ones do not.
func TestJWTBearer(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "jwks.json"), jwksOf(t, rsaKey, ecKey))
	az, err := New(Config{JWT: JWTConfig{JWKSFile: filepath.Join(dir, "jwks.json"), Issuer: "https://idp", Audience: "berth"}, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer az.Close()
	sign := func(method jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
		tok := jwt.NewWithClaims(method, claims)
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	good := func() jwt.MapClaims {
		return jwt.MapClaims{"iss": "https://idp", "aud": "berth", "sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}
	}
	ident := func(tok string) (Identity, error) {
		return az.identify(metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+tok)))
	}
	for _, tok := range []string{sign(jwt.SigningMethodRS256, "r1", rsaKey, good()), sign(jwt.SigningMethodES256, "e1", ecKey, good())} {
		if id, err := ident(tok); err != nil || id.Name != "alice" || id.Via != "jwt" {
			t.Errorf("valid JWT: %+v %v", id, err)
		}
	}
	expired, wrongAud, noExp := good(), good(), good()
	expired["exp"] = time.Now().Add(-time.Minute).Unix()
	wrongAud["aud"] = "other"
	delete(noExp, "exp")
	for name, tok := range map[string]string{
		"expired":        sign(jwt.SigningMethodRS256, "r1", rsaKey, expired),
		"wrong audience": sign(jwt.SigningMethodRS256, "r1", rsaKey, wrongAud),
		"no expiry":      sign(jwt.SigningMethodRS256, "r1", rsaKey, noExp),
		"unknown key":    sign(jwt.SigningMethodES256, "e1", stranger, good()),
		"unknown kid":    sign(jwt.SigningMethodES256, "e9", ecKey, good()),
		"alg none":       sign(jwt.SigningMethodNone, "r1", jwt.UnsafeAllowNoneSignatureType, good()),
	} {
		if _, err := ident(tok); status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s JWT: %v, want Unauthenticated", name, err)
		}
	}
}
