package server

import (
	"context"
	"sync"

	"google.golang.org/grpc"
)

// handlers counts the RPC handlers running, so Shutdown knows when every
// call has had its answer written. GracefulStop waits for more: for every
// connection to close, and a connection whose client stopped reading never
// flushes the end of its ended watch streams.
type handlers struct {
	mu    sync.Mutex
	n     int
	idles []chan struct{}
}

func (h *handlers) enter() {
	h.mu.Lock()
	h.n++
	h.mu.Unlock()
}

func (h *handlers) exit() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n--; h.n == 0 {
		for _, ch := range h.idles {
			close(ch)
		}
		h.idles = nil
	}
}

// idle is closed once no handler runs.
func (h *handlers) idle() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := make(chan struct{})
	if h.n == 0 {
		close(ch)
	} else {
		h.idles = append(h.idles, ch)
	}
	return ch
}

func (h *handlers) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	h.enter()
	defer h.exit()
	return handler(ctx, req)
}

func (h *handlers) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	h.enter()
	defer h.exit()
	return handler(srv, ss)
}
