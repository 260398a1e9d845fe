package framework

// The name rules of Kubernetes (DNS-1123 labels and subdomains, label keys
// and values) that the API's validation and label selectors share, checked
// a byte at a time: every submitted pod is checked against several, and
// the equivalent regular expressions took half of what validating a pod
// cost. They check syntax only; callers bound lengths, each with its own
// message. TestNameRulesAgreeWithRegexps holds each to its regular
// expression.

func isLowerAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

func isAlnum(c byte) bool { return isLowerAlnum(c) || 'A' <= c && c <= 'Z' }

// IsDNSLabel: lower-case alphanumerics and '-', starting and ending
// alphanumeric.
func IsDNSLabel(s string) bool {
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

// IsDNSSubdomain: DNS labels joined by '.'.
func IsDNSSubdomain(s string) bool {
	for start := 0; ; {
		end := start
		for end < len(s) && s[end] != '.' {
			end++
		}
		if !IsDNSLabel(s[start:end]) {
			return false
		}
		if end == len(s) {
			return true
		}
		start = end + 1
	}
}

// IsLabelValue: empty, or alphanumerics, '-', '_' and '.', starting and
// ending alphanumeric.
func IsLabelValue(s string) bool {
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

// IsLabelName is IsLabelValue without the empty string: the name part of a
// qualified name (a label key, taint key or extended resource).
func IsLabelName(s string) bool { return s != "" && IsLabelValue(s) }
