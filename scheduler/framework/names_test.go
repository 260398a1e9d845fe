package framework

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// The rules as Kubernetes writes them, the oracle for the byte matchers.
var nameRegexps = []struct {
	name  string
	re    *regexp.Regexp
	match func(string) bool
}{
	{"dns label", regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`), IsDNSLabel},
	{"dns subdomain", regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`), IsDNSSubdomain},
	{"label name", regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`), IsLabelName},
	{"label value", regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`), IsLabelValue},
}

func TestNameRulesAgreeWithRegexps(t *testing.T) {
	check := func(s string) {
		t.Helper()
		for _, r := range nameRegexps {
			if got, want := r.match(s), r.re.MatchString(s); got != want {
				t.Fatalf("%s(%q) = %v, the regexp says %v", r.name, s, got, want)
			}
		}
	}
	// Every string of up to five characters over one character of each
	// class the rules tell apart, and one no rule allows.
	const alphabet = "a9Z-._/"
	var walk func(prefix []byte)
	walk = func(prefix []byte) {
		check(string(prefix))
		if len(prefix) == 5 {
			return
		}
		for i := range len(alphabet) {
			walk(append(prefix, alphabet[i]))
		}
	}
	walk(nil)
	// Longer strings over every byte value, mostly from the allowed ones.
	rng := rand.New(rand.NewPCG(1, 2))
	common := []byte("abcxyz019-.ABZ_")
	for range 20000 {
		b := make([]byte, rng.IntN(80))
		for i := range b {
			if rng.IntN(20) == 0 {
				b[i] = byte(rng.IntN(256))
			} else {
				b[i] = common[rng.IntN(len(common))]
			}
		}
		check(string(b))
	}
	for _, s := range []string{"", "a", "a.b", "a..b", ".a", "a.", "-a", "a-", "ü", "a\x00b", "A", "a_b", "a/b"} {
		check(s)
	}
}
