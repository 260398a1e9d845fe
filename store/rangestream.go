package store

import (
	"context"
	"errors"
	"io"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// etcd's Range reports how many keys the whole range holds, even with a
// limit, and counts them by visiting every key from the request's start
// to the range's end. A listing read in pages therefore visited about half
// the range again for every page: a million pod keys took 7.8 s to list,
// where 100,000 took 0.2 s (BenchmarkFullListing), and each page held
// etcd's index read lock, and so its writes, for the length of its count.
// etcd 3.7's RangeStream reads a range at one revision in chunks without
// that count. rangePages uses it, and falls back to pages on an etcd
// without it.

// errNoRangeStream: the etcd has no RangeStream (before 3.7).
var errNoRangeStream = errors.New("etcd has no RangeStream")

// streamPages is rangePages through RangeStream. Its chunks are gathered
// into pages of about pageBytes. Like each page of the fallback, each
// chunk has RequestTimeout to arrive (not counting the time fn takes), so
// a listing of any size completes and a stalled one fails.
func (s *Store) streamPages(ctx context.Context, op, start, end string, rev int64, pageBytes int, fn func([]*mvccpb.KeyValue)) (int64, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stalled := time.AfterFunc(s.cfg.RequestTimeout, cancel)
	defer stalled.Stop()
	opts := []clientv3.OpOption{clientv3.WithRange(end)}
	if rev != 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	chunks, err := s.client.GetStream(sctx, start, opts...)
	if err != nil {
		return 0, s.streamError(ctx, op, err, false)
	}
	var page []*mvccpb.KeyValue
	size, received, asked := 0, false, rev
	// Read to the end whatever happens: clientv3's reader goroutine
	// blocks until its last message is taken.
	for chunk := range chunks {
		if err != nil {
			continue
		}
		if err = chunk.Err(); err != nil {
			continue
		}
		received = true
		page = append(page, chunk.Kvs...)
		for _, kv := range chunk.Kvs {
			size += len(kv.Key) + len(kv.Value)
		}
		if h := chunk.Header; h != nil && asked == 0 {
			rev = h.Revision // the last chunk's: the current revision, read at
		}
		if size >= pageBytes {
			stalled.Stop() // the time fn takes is not etcd's
			fn(page)
			page, size = nil, 0
		}
		stalled.Reset(s.cfg.RequestTimeout)
	}
	if err != nil {
		return 0, s.streamError(ctx, op, err, received)
	}
	if len(page) > 0 {
		fn(page)
	}
	return rev, nil
}

// streamError is callError for a stream's error, or errNoRangeStream if
// the server does not know the call and nothing was read yet.
func (s *Store) streamError(ctx context.Context, op string, err error, received bool) error {
	if !received && status.Code(err) == codes.Unimplemented {
		return errNoRangeStream
	}
	return s.callError(ctx, op, rpctypes.Error(err))
}

// inProcessKV is the embedded etcd's KV service called in-process, with
// the RangeStream that etcd's own in-process adapter does not implement.
type inProcessKV struct {
	pb.KVClient // etcd's adapter, for every unary call
	server      pb.KVServer
}

// RangeStream runs the server's handler on a goroutine of its own, which
// hands each chunk over as the caller receives it.
func (k inProcessKV) RangeStream(ctx context.Context, in *pb.RangeRequest, _ ...grpc.CallOption) (pb.KV_RangeStreamClient, error) {
	ctx, cancel := context.WithCancel(ctx)
	p := &rangePipe{ctx: ctx, chunks: make(chan *pb.RangeStreamResponse), done: make(chan struct{})}
	go func() {
		defer cancel()
		p.err = k.server.RangeStream(in, rangePipeServer{p})
		close(p.done)
	}()
	return rangePipeClient{p}, nil
}

// rangePipe joins the two ends of an in-process RangeStream. A chunk is
// handed over only when the client takes it, so none is left behind when
// the handler ends, and done then says why.
type rangePipe struct {
	ctx    context.Context
	chunks chan *pb.RangeStreamResponse
	done   chan struct{}
	err    error // the handler's result, set before done closes
}

// rangePipeServer is the handler's end (pb.KV_RangeStreamServer).
type rangePipeServer struct{ p *rangePipe }

func (s rangePipeServer) Send(r *pb.RangeStreamResponse) error {
	select {
	case s.p.chunks <- r:
		return nil
	case <-s.p.ctx.Done():
		return s.p.ctx.Err()
	}
}

func (s rangePipeServer) SendMsg(m any) error {
	r, ok := m.(*pb.RangeStreamResponse)
	if !ok {
		return status.Errorf(codes.Internal, "range stream: cannot send %T", m)
	}
	return s.Send(r)
}

func (s rangePipeServer) Context() context.Context   { return s.p.ctx }
func (rangePipeServer) SetHeader(metadata.MD) error  { return nil }
func (rangePipeServer) SendHeader(metadata.MD) error { return nil }
func (rangePipeServer) SetTrailer(metadata.MD)       {}
func (rangePipeServer) RecvMsg(any) error            { return io.EOF }

// rangePipeClient is the caller's end (pb.KV_RangeStreamClient).
type rangePipeClient struct{ p *rangePipe }

func (c rangePipeClient) Recv() (*pb.RangeStreamResponse, error) {
	select {
	case r := <-c.p.chunks:
		return r, nil
	case <-c.p.done:
		if c.p.err != nil {
			return nil, c.p.err
		}
		return nil, io.EOF
	}
}

func (c rangePipeClient) Context() context.Context   { return c.p.ctx }
func (rangePipeClient) Header() (metadata.MD, error) { return nil, nil }
func (rangePipeClient) Trailer() metadata.MD         { return nil }
func (rangePipeClient) CloseSend() error             { return nil }
func (rangePipeClient) SendMsg(any) error            { return nil }
func (rangePipeClient) RecvMsg(any) error {
	return status.Error(codes.Internal, "range stream: read it with Recv")
}
