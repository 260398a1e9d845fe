package framework

// wildcardIP is the address that conflicts with every other address.
const wildcardIP = "0.0.0.0"

// ProtocolPort is a protocol and port pair.
type ProtocolPort struct {
	Protocol Protocol
	Port     int32
}

// HostPortInfo records host ports in use: ip -> set of protocol/port.
type HostPortInfo map[string]map[ProtocolPort]struct{}

func normalizePort(ip string, protocol Protocol) (string, Protocol) {
	if ip == "" {
		ip = wildcardIP
	}
	if protocol == "" {
		protocol = ProtocolTCP
	}
	return ip, protocol
}

// Add records a port in use.
func (h HostPortInfo) Add(ip string, protocol Protocol, port int32) {
	ip, protocol = normalizePort(ip, protocol)
	pp := ProtocolPort{Protocol: protocol, Port: port}
	if h[ip] == nil {
		h[ip] = map[ProtocolPort]struct{}{}
	}
	h[ip][pp] = struct{}{}
}

// Remove forgets a port.
func (h HostPortInfo) Remove(ip string, protocol Protocol, port int32) {
	ip, protocol = normalizePort(ip, protocol)
	if m, ok := h[ip]; ok {
		delete(m, ProtocolPort{Protocol: protocol, Port: port})
		if len(m) == 0 {
			delete(h, ip)
		}
	}
}

// CheckConflict reports whether the port clashes with one in use: the
// wildcard address clashes with every address.
func (h HostPortInfo) CheckConflict(ip string, protocol Protocol, port int32) bool {
	if port <= 0 {
		return false
	}
	ip, protocol = normalizePort(ip, protocol)
	pp := ProtocolPort{Protocol: protocol, Port: port}
	if ip == wildcardIP {
		for _, m := range h {
			if _, ok := m[pp]; ok {
				return true
			}
		}
		return false
	}
	for _, candidate := range []string{ip, wildcardIP} {
		if m, ok := h[candidate]; ok {
			if _, ok := m[pp]; ok {
				return true
			}
		}
	}
	return false
}

// Clone returns a deep copy.
func (h HostPortInfo) Clone() HostPortInfo {
	c := make(HostPortInfo, len(h))
	for ip, m := range h {
		cm := make(map[ProtocolPort]struct{}, len(m))
		for k := range m {
			cm[k] = struct{}{}
		}
		c[ip] = cm
	}
	return c
}
