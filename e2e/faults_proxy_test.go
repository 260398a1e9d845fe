package e2e

import (
	"io"
	"net"
	"sync"
	"testing"
)

// cutProxy forwards TCP connections from a loopback port to one target.
// Cut drops every open connection and refuses new ones (they are accepted
// and closed at once, so the port stays ours); Heal lets them through
// again. A replica's etcd connections go through these, one per member.
type cutProxy struct {
	lis    net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{lis: lis, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) addr() string { return p.lis.Addr().String() }

func (p *cutProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

// track registers c unless the proxy is cut.
func (p *cutProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *cutProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
}

func (p *cutProxy) forward(client net.Conn) {
	defer p.wg.Done()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		p.untrack(client) // the member is down: the client sees a reset
		return
	}
	if !p.track(server) {
		server.Close()
		p.untrack(client)
		return
	}
	var copies sync.WaitGroup
	copies.Add(2)
	pipe := func(dst, src net.Conn) {
		defer copies.Done()
		_, _ = io.Copy(dst, src)
		// Either side ending ends both: half-open links would hide a cut.
		dst.Close()
		src.Close()
	}
	go pipe(server, client)
	go pipe(client, server)
	copies.Wait()
	p.untrack(client, server)
}

// setCut cuts (true) or heals (false) the link.
func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
	}
}

func (p *cutProxy) close() {
	p.lis.Close()
	p.setCut(true)
	p.wg.Wait()
}
