package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// The bridge didn't answer, or its answer was cut: both may pass.
var (
	errUnreachable = errors.New("bridge unreachable")
	errCut         = errors.New("reading the bridge's answer")
)

// getBridge GETs u from the bridge with the bearer token and header, and
// reads the whole answer, at most limit bytes (the caller judges a body of
// limit bytes as too long): a connection cut mid-body is errCut, never a
// partial answer. A failed request wraps errUnreachable; an answer other
// than 200 is a *bridgeError with the bridge's reason, error and line (a
// gateway's page: its text, reason http_STATUS).
func getBridge(ctx context.Context, u, token string, header http.Header, limit int64) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, usagef("BUCKETOPS_BRIDGE: %q: %v", u, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errUnreachable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errCut, err)
	}
	if resp.StatusCode != http.StatusOK {
		var eb struct{ Error, Reason, Message string }
		if json.Unmarshal(body, &eb) != nil || eb.Error == "" {
			eb.Error, eb.Reason, eb.Message = strings.TrimSpace(string(body)), "http_"+strconv.Itoa(resp.StatusCode), ""
		}
		return resp, body, &bridgeError{status: resp.StatusCode, reason: eb.Reason, message: eb.Error, line: eb.Message}
	}
	return resp, body, nil
}
