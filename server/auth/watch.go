package auth

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// bindingsFilter passes a namespace-limited watcher only its namespaces'
// events. The grant is looked up again for every event, so a policy change
// applies to open streams; a revoked grant ends the stream.
type bindingsFilter struct {
	grpc.ServerStream
	a        *Authorizer
	identity string
	// listing: a from-0 watch is sending the bound pods, until its own
	// progress marker; a marker of ours then would end the listing early.
	listing bool
}

func (f *bindingsFilter) RecvMsg(m any) error {
	if err := f.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if req, ok := m.(*berthv1.WatchBindingsRequest); ok {
		f.listing = req.GetFromRevision() == 0
	}
	return nil
}

func (f *bindingsFilter) SendMsg(m any) error {
	resp, ok := m.(*berthv1.WatchBindingsResponse)
	ev := resp.GetEvent()
	if !ok || ev == nil {
		if resp.GetProgressRevision() > 0 {
			f.listing = false
		}
		return f.ServerStream.SendMsg(m)
	}
	g := f.a.policy.Load().grant(f.identity)
	if g == nil || !g.Role.allows(rules[watchBindings], true) {
		return status.Errorf(codes.PermissionDenied, "%s lost its grant", f.identity)
	}
	if g.inNamespace(ev.GetNamespace()) {
		return f.ServerStream.SendMsg(m)
	}
	if f.listing {
		return nil
	}
	// The event is hidden, but its revision is not withheld: a progress
	// marker moves the watcher's resume point past it, so a watcher whose
	// namespaces are quiet does not fall behind compaction.
	return f.ServerStream.SendMsg(&berthv1.WatchBindingsResponse{ProgressRevision: ev.GetRevision()})
}
