package auth

import (
	"fmt"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
)

// DefaultPollInterval is how often watched files are checked for change.
const DefaultPollInterval = 2 * time.Second

// fileSet remembers the modification times and sizes of the files one
// value is loaded from, so a poller can tell when to load it again.
type fileSet []string

type stamp struct {
	mod  time.Time
	size int64
}

func (fs fileSet) stamps() ([]stamp, error) {
	out := make([]stamp, 0, len(fs))
	for _, p := range fs {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		out = append(out, stamp{fi.ModTime(), fi.Size()})
	}
	return out, nil
}

func sameStamps(a, b []stamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].mod.Equal(b[i].mod) || a[i].size != b[i].size {
			return false
		}
	}
	return true
}

// poller reloads a value when its files change. A failed load (often a
// rotation caught half-written) keeps the last good value and is retried
// on the next tick, because the files still differ from those last loaded.
type poller struct {
	name  string
	files fileSet
	load  func() error
	log   *zap.Logger

	last []stamp
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// startPoller loads once, failing if that fails, then polls every interval.
func startPoller(name string, files fileSet, interval time.Duration, log *zap.Logger, load func() error) (*poller, error) {
	p := &poller{name: name, files: files, load: load, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	st, err := files.stamps()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := load(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p.last = st
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	go p.run(interval)
	return p, nil
}

func (p *poller) run(interval time.Duration) {
	defer close(p.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.check()
		}
	}
}

// check reloads if any file changed since the last good load.
func (p *poller) check() {
	st, err := p.files.stamps()
	if err != nil {
		p.log.Warn("cannot stat; keeping the loaded "+p.name, zap.Error(err))
		return
	}
	if sameStamps(st, p.last) {
		return
	}
	if err := p.load(); err != nil {
		p.log.Warn("reload failed; keeping the loaded "+p.name, zap.Error(err))
		return
	}
	p.last = st
	p.log.Info("reloaded " + p.name)
}

func (p *poller) close() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		close(p.stop)
		<-p.done
	})
}
