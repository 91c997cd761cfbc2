package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sync"
	"syscall"
	"time"
)

// gcsWait tells a person at a terminal what a command is waiting for when
// GCS (or the emulator) doesn't answer: the GCS client retries quietly
// until --timeout, two minutes by default. After noticeAfter of retrying
// it says what failed and until when it tries, then again every
// noticeEvery; a refused connection fails at once (store.FailFastOnRefused)
// and explain says where nothing answered.
type gcsWait struct {
	mu       sync.Mutex
	w        io.Writer
	emulator string
	timeout  time.Duration
	started  time.Time
	last     time.Time   // of the last notice
	lastErr  error       // retried on since the last notice
	lastAt   time.Time   // when
	timer    *time.Timer // of the next notice
	done     bool
}

const (
	noticeAfter = 3 * time.Second
	noticeEvery = 10 * time.Second
)

func (g *gcsWait) start(w io.Writer, emulator string, timeout time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.w, g.emulator, g.timeout, g.started = w, emulator, timeout, time.Now()
}

// stop ends the notices: the command is over.
func (g *gcsWait) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.done = true
	if g.timer != nil {
		g.timer.Stop()
	}
}

// target is what the CLI talks to.
func (g *gcsWait) target() string {
	if g.emulator != "" {
		return "the GCS emulator at " + g.emulator + " (STORAGE_EMULATOR_HOST)"
	}
	return "Google Cloud Storage"
}

// note hears an error a request is retried on, and has it told
// noticeAfter into the command (or noticeEvery after the last notice).
func (g *gcsWait) note(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	// The command's own deadline or interruption is not GCS failing:
	// the error that ends the command says so.
	if g.w == nil || g.done || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return
	}
	g.lastErr, g.lastAt = err, time.Now()
	if g.timer != nil {
		return
	}
	next := g.started.Add(noticeAfter)
	if !g.last.IsZero() {
		next = g.last.Add(noticeEvery)
	}
	g.timer = time.AfterFunc(time.Until(next), g.tell)
}

// tell says what the command is waiting for, when a request was retried
// lately.
func (g *gcsWait) tell() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.timer = nil
	if g.done || g.lastErr == nil || time.Since(g.lastAt) > noticeEvery {
		return
	}
	g.last = time.Now()
	fmt.Fprintf(g.w, "bucketops: waiting for %s for %s: %v; retrying until --timeout %s\n",
		g.target(), g.last.Sub(g.started).Round(time.Second), g.lastErr, g.timeout)
	g.lastErr = nil
}

// explain adds to a refused connection where nothing answered and what to
// check.
func (g *gcsWait) explain(err error) error {
	if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	msg := requestURL.ReplaceAllString(err.Error(), "")
	if g.emulator != "" {
		msg += ": nothing answers at " + g.target() + "; is the bridge in local mode (make run) still running? Source its bin/local.env again, or unset STORAGE_EMULATOR_HOST to use Google Cloud Storage"
	} else {
		msg += ": the connection was refused; check the network and any proxy (HTTPS_PROXY) between here and storage.googleapis.com"
	}
	return &explained{msg: msg, err: err}
}

// requestURL is the method and URL net/http puts in its errors: long, and
// nothing a reader acts on.
var requestURL = regexp.MustCompile(`(?:Get|Head|Post|Put|Patch|Delete) "[^"]*": `)

// explained is err with a message for people; errors.Is and As see err.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }
