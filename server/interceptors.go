package server

import (
	"context"
	"fmt"
	"runtime/debug"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-io/berth/server/admission"
	"github.com/berth-io/berth/server/auth"
)

// zapLogger adapts zap to the logging interceptor. Disabled levels return
// before any field is converted, which matters at tens of thousands of calls
// a second.
func zapLogger(l *zap.Logger) logging.Logger {
	return logging.LoggerFunc(func(_ context.Context, lvl logging.Level, msg string, fields ...any) {
		zl := zapLevel(lvl)
		if !l.Core().Enabled(zl) {
			return
		}
		zf := make([]zap.Field, 0, len(fields)/2)
		for i := 0; i+1 < len(fields); i += 2 {
			key, _ := fields[i].(string)
			zf = append(zf, zap.Any(key, fields[i+1]))
		}
		l.Log(zl, msg, zf...)
	})
}

func zapLevel(lvl logging.Level) zapcore.Level {
	switch lvl {
	case logging.LevelDebug:
		return zapcore.DebugLevel
	case logging.LevelInfo:
		return zapcore.InfoLevel
	case logging.LevelWarn:
		return zapcore.WarnLevel
	default:
		return zapcore.ErrorLevel
	}
}

// callLevel keeps successful calls out of the default log: at load-test
// rates one line per call would cost more than the call.
func callLevel(code codes.Code) logging.Level {
	switch code {
	case codes.OK, codes.Canceled:
		return logging.LevelDebug
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.FailedPrecondition,
		codes.ResourceExhausted, codes.OutOfRange, codes.Aborted, codes.DeadlineExceeded:
		return logging.LevelInfo
	case codes.Unavailable:
		return logging.LevelWarn
	default:
		return logging.LevelError
	}
}

func validationUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := validateRequest(req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// validatingStream checks each message a streaming handler receives.
type validatingStream struct{ grpc.ServerStream }

func (s validatingStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return validateRequest(m)
}

func validationStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, validatingStream{ss})
}

// interceptorOptions builds the chain: a count of running handlers (for
// Shutdown) outermost, then metrics so they see every outcome, then
// logging, then authorization (az; nil: none) so a refused call reaches
// nothing else, then admission (a shed call is counted and logged but costs
// nothing more), then validation, and panic recovery innermost so a panic
// becomes codes.Internal that logging and metrics still record.
func interceptorOptions(logger *zap.Logger, metrics *grpcprom.ServerMetrics, az *auth.Authorizer, admit *admission.Controller, running *handlers) []grpc.ServerOption {
	logOpts := []logging.Option{
		logging.WithLogOnEvents(logging.FinishCall),
		logging.WithLevels(callLevel),
	}
	recoverOpts := []recovery.Option{recovery.WithRecoveryHandler(func(p any) error {
		logger.Error("panic in handler", zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
		return status.Error(codes.Internal, fmt.Sprintf("internal error: %v", p))
	})}
	zl := zapLogger(logger)
	unary := []grpc.UnaryServerInterceptor{
		running.unary,
		metrics.UnaryServerInterceptor(),
		logging.UnaryServerInterceptor(zl, logOpts...),
	}
	stream := []grpc.StreamServerInterceptor{
		running.stream,
		metrics.StreamServerInterceptor(),
		logging.StreamServerInterceptor(zl, logOpts...),
	}
	if az != nil { // issue 10: authn/authz before anything that reads the request
		unary, stream = append(unary, az.Unary), append(stream, az.Stream)
	}
	unary = append(unary, admit.Unary, validationUnary, recovery.UnaryServerInterceptor(recoverOpts...))
	stream = append(stream, admit.Stream, validationStream, recovery.StreamServerInterceptor(recoverOpts...))
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...)}
}
