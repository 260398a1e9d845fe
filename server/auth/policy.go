package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Role is a named set of permissions.
type Role string

// The roles a policy can grant.
const (
	// RoleAdmin may call everything.
	RoleAdmin Role = "admin"
	// RoleOrchestrator drives the cluster: nodes, pods, binding feedback,
	// pod groups and disruption budgets, and reads all of them.
	RoleOrchestrator Role = "orchestrator"
	// RoleObserver may only read: Get, List, Watch and Explain.
	RoleObserver Role = "observer"
)

// Grant is what a policy gives one identity.
type Grant struct {
	// Identity is the certificate's URI SAN or common name, or the name a
	// token maps to.
	Identity string `yaml:"identity"`
	Role     Role   `yaml:"role"`
	// Namespaces, when not empty, limits the grant to these namespaces;
	// cluster-scoped calls (nodes, replicas) are then refused.
	Namespaces []string `yaml:"namespaces,omitempty"`
}

// Policy maps identities to grants; identities not in it get nothing.
type Policy struct {
	Grants []Grant `yaml:"grants"`
	byName map[string]*Grant
}

// ParsePolicy reads a policy document:
//
//	grants:
//	  - {identity: ops, role: admin}
//	  - {identity: spiffe://example/orch-a, role: orchestrator, namespaces: [team-a]}
func ParsePolicy(data []byte) (*Policy, error) {
	var p Policy
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	p.byName = make(map[string]*Grant, len(p.Grants))
	for i := range p.Grants {
		g := &p.Grants[i]
		switch {
		case g.Identity == "":
			return nil, fmt.Errorf("policy: grant %d has no identity", i+1)
		case g.Role != RoleAdmin && g.Role != RoleOrchestrator && g.Role != RoleObserver:
			return nil, fmt.Errorf("policy: grant for %q: unknown role %q (want admin, orchestrator or observer)", g.Identity, g.Role)
		case g.Role == RoleAdmin && len(g.Namespaces) > 0:
			return nil, fmt.Errorf("policy: grant for %q: admin cannot be limited to namespaces", g.Identity)
		case p.byName[g.Identity] != nil:
			return nil, fmt.Errorf("policy: identity %q granted twice", g.Identity)
		}
		slices.Sort(g.Namespaces)
		p.byName[g.Identity] = g
	}
	return &p, nil
}

func loadPolicy(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePolicy(data)
}

// grant is nil for an identity the policy does not name.
func (p *Policy) grant(identity string) *Grant { return p.byName[identity] }

// inNamespace reports whether the grant covers ns; "" (all namespaces)
// only for an unrestricted grant.
func (g *Grant) inNamespace(ns string) bool {
	if len(g.Namespaces) == 0 {
		return true
	}
	_, found := slices.BinarySearch(g.Namespaces, ns)
	return ns != "" && found
}

// tokens maps the sha256 of a bearer token, hex-encoded, to its identity,
// so the file holds no usable secret.
type tokens map[string]string

// parseTokens reads lines of "<sha256 hex> <identity>"; blank lines and
// lines starting with # are skipped.
func parseTokens(data []byte) (tokens, error) {
	out := tokens{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		hash, identity, ok := strings.Cut(line, " ")
		identity = strings.TrimSpace(identity)
		hash = strings.ToLower(hash)
		if b, err := hex.DecodeString(hash); !ok || err != nil || len(b) != sha256.Size || identity == "" {
			return nil, fmt.Errorf("tokens line %d: want \"<sha256 hex> <identity>\"", n)
		}
		out[hash] = identity
	}
	return out, sc.Err()
}

func loadTokens(path string) (tokens, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseTokens(data)
}

// HashToken is the tokens file's form of a token.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func (t tokens) identity(token string) (string, bool) {
	id, ok := t[HashToken(token)]
	return id, ok
}
