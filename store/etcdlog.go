package store

import (
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// benignEtcdLog is a message the embedded etcd logs at warn or error that
// asks nothing of the operator. errorHas, when set, narrows it to entries
// whose error says so, so the same message with another cause still shows.
type benignEtcdLog struct {
	msg, errorHas string
}

// benignEtcdLogs are dropped from the embedded etcd's log: the
// configuration notes of a single loopback member (Berth chose them), the
// listeners' complaints that they were closed (every clean stop), the
// retries of publishing the member while a large database replays (dozens
// per restart; a publish that never succeeds fails StartEmbedded instead),
// and a new member's storage-version check that runs once the member has
// elected itself but before its backend has committed the raft term: etcd
// checks again every few seconds, and the next check finds the term. A
// lone member elects itself fast enough to win that race at times, on a
// fresh data directory (seen in CI).
var benignEtcdLogs = []benignEtcdLog{
	{msg: "Running http and grpc server on single port. This is not recommended for production."},
	{msg: "simple token is not cryptographically signed"},
	{msg: "setting up serving from embedded etcd failed.", errorHas: "closed"},
	{msg: "stopping insecure grpc server due to error", errorHas: "closed"},
	{msg: "stopped insecure grpc server due to error", errorHas: "closed"},
	{msg: "stopping secure grpc server due to error", errorHas: "closed"},
	{msg: "stopped secure grpc server due to error", errorHas: "closed"},
	{msg: "failed to publish local member to cluster through raft", errorHas: "too many requests"},
	{msg: "Failed to detect schema version", errorHas: "missing term information"},
	{msg: "failed to update storage version", errorHas: "missing term information"},
}

// etcdLogger is the embedded etcd's own logger: parent named "etcd", warn
// and above, without the benign messages.
func etcdLogger(parent *zap.Logger) *zap.Logger {
	return parent.Named("etcd").WithOptions(
		zap.IncreaseLevel(zap.WarnLevel),
		zap.WrapCore(func(c zapcore.Core) zapcore.Core { return quietCore{c} }),
	)
}

// quietCore drops benignEtcdLogs and passes everything else on.
type quietCore struct{ zapcore.Core }

func (c quietCore) With(fields []zapcore.Field) zapcore.Core { return quietCore{c.Core.With(fields)} }

func (c quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.Enabled(e.Level) {
		return ce
	}
	return ce.AddCore(e, c)
}

func (c quietCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	if isBenignEtcdLog(e.Message, fields) {
		return nil
	}
	return c.Core.Write(e, fields)
}

func isBenignEtcdLog(msg string, fields []zapcore.Field) bool {
	for _, b := range benignEtcdLogs {
		if b.msg != msg {
			continue
		}
		if b.errorHas == "" || strings.Contains(errorText(fields), b.errorHas) {
			return true
		}
	}
	return false
}

// errorText is the text of the entry's zap.Error field, or "".
func errorText(fields []zapcore.Field) string {
	for _, f := range fields {
		if f.Type != zapcore.ErrorType || f.Key != "error" {
			continue
		}
		if err, ok := f.Interface.(error); ok && err != nil {
			return err.Error()
		}
	}
	return ""
}
