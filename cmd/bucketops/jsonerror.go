package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/bucketops/bucketops/policy"
	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/store"
)

// errorObject is what -o json prints on stdout when a command fails before
// printing anything, so a script reads the failure from the same stream
// as the answer: {"error": {"code": …, "exit": …, "message": …}}.
type errorObject struct {
	Error struct {
		Code    string `json:"code"`
		Exit    int    `json:"exit"`
		Message string `json:"message"`
	} `json:"error"`
}

// errorCode names a failure for scripts: the bridge's own reason when the
// bridge refused, else the kind of error, the exit code's in more detail.
func errorCode(err error) string {
	var bridge *bridgeError
	var usage usageError
	switch {
	case errors.As(err, &bridge) && bridge.reason != "":
		return bridge.reason
	case errors.Is(err, errDiffers):
		return "differs"
	case errors.Is(err, errRolledBack):
		return "rolled_back"
	case errors.Is(err, errUnverified):
		return "unverified"
	case errors.Is(err, errNotDeployed):
		return "not_deployed"
	case errors.Is(err, store.ErrStale):
		return "stale"
	case errors.Is(err, store.ErrConflict):
		return "conflict"
	case errors.Is(err, store.ErrInvalidApp):
		return "invalid_app"
	case errors.Is(err, store.ErrInvalidLocation), errors.Is(err, store.ErrBucket):
		return "bucket"
	case errors.Is(err, render.ErrInvalid):
		return "invalid_release"
	case errors.Is(err, store.ErrTooLarge):
		return "too_large"
	case errors.Is(err, policy.ErrDenied):
		return "policy_denied"
	case errors.Is(err, store.ErrInvalidRetention):
		return "invalid_retention"
	case errors.As(err, &usage):
		return "usage"
	case errors.Is(err, store.ErrNotFound):
		return "not_found"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "failure"
}

// writeErrorObject prints err as an errorObject, on one line.
func writeErrorObject(w io.Writer, err error) {
	var o errorObject
	o.Error.Code, o.Error.Exit, o.Error.Message = errorCode(err), exitCode(err), err.Error()
	data, _ := json.Marshal(o) // strings and an int always encode
	w.Write(append(data, '\n'))
}

// countingWriter tells whether anything was written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
