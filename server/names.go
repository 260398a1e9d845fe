package server

// The name rules of Kubernetes (DNS-1123 labels and subdomains, label keys
// and values), checked a byte at a time: every submitted pod is checked
// against several of them, and the equivalent regular expressions took a
// third of what validating a pod cost. TestNameMatchersAgreeWithRegexps
// holds each to its regular expression.

func isLowerAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

func isAlnum(c byte) bool { return isLowerAlnum(c) || 'A' <= c && c <= 'Z' }

// isDNSLabel: lower-case alphanumerics and '-', starting and ending
// alphanumeric; any length (callers bound it).
func isDNSLabel(s string) bool {
	if s == "" || !isLowerAlnum(s[0]) || !isLowerAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !isLowerAlnum(c) && c != '-' {
			return false
		}
	}
	return true
}

// isDNSSubdomain: DNS labels joined by '.'.
func isDNSSubdomain(s string) bool {
	for start := 0; ; {
		end := start
		for end < len(s) && s[end] != '.' {
			end++
		}
		if !isDNSLabel(s[start:end]) {
			return false
		}
		if end == len(s) {
			return true
		}
		start = end + 1
	}
}

// isLabelValue: empty, or alphanumerics, '-', '_' and '.', starting and
// ending alphanumeric.
func isLabelValue(s string) bool {
	if s == "" {
		return true
	}
	if !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// isLabelName is isLabelValue without the empty string: the name part of a
// qualified name.
func isLabelName(s string) bool { return s != "" && isLabelValue(s) }
