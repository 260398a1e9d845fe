package store

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// txnSpanName names the span of one group-committed Txn.
const txnSpanName = "etcd.Txn"

// startTxnSpan starts the span of one Txn carrying units. The Txn serves
// many writers, so it is parented to none of them: it links to each
// writer's span, and each writer's span gets an event naming the Txn, so
// either side leads to the other.
func (c *groupCommitter) startTxnSpan(units []*commitUnit, ops int) (context.Context, trace.Span) {
	links := make([]trace.Link, 0, len(units))
	for _, u := range units {
		if sc := trace.SpanContextFromContext(u.ctx); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	ctx, span := c.tracer.Start(context.Background(), txnSpanName,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(links...),
		trace.WithAttributes(attribute.Int("berth.txn.units", len(units)), attribute.Int("berth.txn.ops", ops)))
	if len(links) > 0 {
		txn := span.SpanContext()
		event := trace.WithAttributes(
			attribute.String("berth.txn.trace_id", txn.TraceID().String()),
			attribute.String("berth.txn.span_id", txn.SpanID().String()),
			attribute.Int("berth.txn.units", len(units)))
		for _, u := range units {
			trace.SpanFromContext(u.ctx).AddEvent("etcd txn sent", event)
		}
	}
	return ctx, span
}

// endTxnSpan records how the Txn went: committed at a revision, failed
// compares (some units are then settled, the rest resent in a new Txn), or
// an error.
func endTxnSpan(span trace.Span, resp *clientv3.TxnResponse, err error) {
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case resp.Succeeded:
		span.SetAttributes(attribute.Int64("berth.txn.revision", resp.Header.Revision))
	default:
		span.SetAttributes(attribute.Bool("berth.txn.compare_failed", true))
	}
	span.End()
}
