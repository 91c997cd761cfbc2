package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// longRun says on stderr how far a long command has got: nothing in its
// first seconds (most commands end before), then a line at most every few
// seconds, so a log of 50,000 releases or a verify --chain reading each of
// them doesn't look hung.
type longRun struct {
	mu      sync.Mutex
	w       io.Writer
	what    string
	started time.Time
	last    time.Time
}

// When the first progress line comes, and how often the next ones
// (variables for the tests).
var (
	progressAfter = 3 * time.Second
	progressEvery = 5 * time.Second
)

func (e *env) longRun(what string) *longRun {
	return &longRun{w: e.stderr, what: what, started: time.Now()}
}

// report says where the command stands, when it is time to.
func (l *longRun) report(format string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if now.Sub(l.started) < progressAfter || now.Sub(l.last) < progressEvery {
		return
	}
	l.last = now
	fmt.Fprintf(l.w, "bucketops: %s: %s (%s)\n", l.what, fmt.Sprintf(format, a...), now.Sub(l.started).Round(time.Second))
}

// listed reports a listing's progress.
func (l *longRun) listed(n int) { l.report("listed %d releases so far", n) }

// checked reports how many releases' bytes were checked.
func (l *longRun) checked(done, total int) {
	l.report("checked the bytes of %d of %d releases", done, total)
}
