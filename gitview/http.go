package gitview

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/format/pktline"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"

	"github.com/bucketops/bucketops/store"
)

// Caps of one upload-pack request, decompressed, far above what git and
// go-git send: Argo CD's fetch of one ref (depth 1 or not) sends one want
// and, the view's history being linear, a few haves, the first of which
// (the client's tip) is usually common. git sends haves in rounds of 16
// doubling up to 16384 and gives up after 256 that get no ACK. Counts are
// capped as well as bytes: a have costs 20 bytes parsed for 50 on the wire.
const (
	maxRequestBytes = 1 << 20 // the body as sent, and again decompressed
	maxWants        = 256
	maxHaves        = 16384
	maxShallows     = 16384
)

// errTooLarge: a request over one of the caps above.
var errTooLarge = errors.New("over the view's request limits")

const readOnly = "this repository is a read-only view of the bucket's releases; publish with bucketops push"

// Handler serves the smart HTTP protocol (v0, stateless RPC), read-only,
// for paths relative to where it is mounted: /{app}.git/info/refs and
// /{app}.git/git-upload-pack. Authentication is the caller's.
func (v *View) Handler() http.Handler {
	return http.HandlerFunc(v.serveHTTP)
}

func (v *View) serveHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.EscapedPath()
	if strings.Contains(p, "%") {
		http.Error(w, "percent-encoded characters are not allowed in a repository path", http.StatusBadRequest)
		return
	}
	p = strings.TrimPrefix(p, "/")
	var app, action string
	for _, a := range []string{"info/refs", "git-upload-pack", "git-receive-pack"} {
		if rest, ok := strings.CutSuffix(p, ".git/"+a); ok {
			app, action = rest, a
			break
		}
	}
	if action == "" {
		http.Error(w, "no such path: a repository is /git/APP.git, served by the smart HTTP protocol (git clone URL)", http.StatusNotFound)
		return
	}
	if err := store.ValidateApp(app); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch {
	case action == "git-receive-pack" || r.URL.Query().Get("service") == "git-receive-pack":
		http.Error(w, readOnly, http.StatusForbidden)
	case action == "info/refs" && r.Method == http.MethodGet && r.URL.Query().Get("service") == "git-upload-pack":
		v.advertise(w, r, app)
	case action == "info/refs" && r.Method == http.MethodGet:
		http.Error(w, "this server speaks git's smart HTTP protocol only; use git 1.6.6 or later", http.StatusForbidden)
	case action == "git-upload-pack" && r.Method == http.MethodPost:
		v.uploadPack(w, r, app)
	default:
		http.Error(w, r.Method+" is not allowed here", http.StatusMethodNotAllowed)
	}
}

// advertise answers GET info/refs?service=git-upload-pack: HEAD and main,
// both at the newest release, read from the bucket's head.
func (v *View) advertise(w http.ResponseWriter, r *http.Request, app string) {
	s, err := v.current(r.Context(), app)
	if err != nil {
		v.fail(w, app, err)
		return
	}
	head := s.head().commit
	ar := packp.NewAdvRefs()
	ar.Prefix = [][]byte{[]byte("# service=git-upload-pack"), pktline.Flush}
	ar.Head = &head
	ar.References[Branch] = head
	for _, c := range []capability.Capability{capability.MultiACKDetailed, capability.NoDone, capability.Sideband64k,
		capability.OFSDelta, capability.Shallow, capability.AllowTipSHA1InWant, capability.AllowReachableSHA1InWant} {
		ar.Capabilities.Add(c)
	}
	ar.Capabilities.Add(capability.SymRef, "HEAD:"+Branch)
	ar.Capabilities.Add(capability.Agent, "bucketops")
	var b bytes.Buffer
	if err := ar.Encode(&b); err != nil {
		v.fail(w, app, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(b.Bytes())
}

func (v *View) fail(w http.ResponseWriter, app string, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		http.Error(w, fmt.Sprintf("no app %s in the bucket: it has no release", app), http.StatusNotFound)
	case errors.Is(err, store.ErrInvalidApp):
		http.Error(w, err.Error(), http.StatusBadRequest)
	default:
		v.log.Warn("git view: reading the bucket failed", "app", app, "error", err)
		http.Error(w, "the bucket can't be read now; try again", http.StatusServiceUnavailable)
	}
}

// request is one upload-pack request of the stateless protocol.
type request struct {
	wants    []plumbing.Hash
	caps     *capability.List
	shallows []plumbing.Hash // the client's shallow commits
	depth    int             // deepen N; 0 when none
	haves    []plumbing.Hash
	done     bool
}

func parseRequest(r io.Reader) (*request, error) {
	req := &request{caps: capability.NewList()}
	sc := pktline.NewScanner(r)
	section := 0 // 0: wants, 1: haves
	for sc.Scan() {
		line := strings.TrimSuffix(string(sc.Bytes()), "\n")
		if line == "" { // flush
			section = 1
			continue
		}
		verb, arg, _ := strings.Cut(line, " ")
		switch {
		case verb == "want" && section == 0:
			sha, caps, _ := strings.Cut(arg, " ")
			h, ok := parseHash(sha)
			if !ok {
				return nil, fmt.Errorf("malformed want %q", line)
			}
			if len(req.wants) == 0 && caps != "" {
				if err := req.caps.Decode([]byte(caps)); err != nil {
					return nil, fmt.Errorf("capabilities %q: %w", caps, err)
				}
			}
			if len(req.wants) == maxWants {
				return nil, fmt.Errorf("%w: more than %d wants; a fetch names a few refs", errTooLarge, maxWants)
			}
			req.wants = append(req.wants, h)
		case verb == "shallow" && section == 0:
			h, ok := parseHash(arg)
			if !ok {
				return nil, fmt.Errorf("malformed shallow %q", line)
			}
			if len(req.shallows) == maxShallows {
				return nil, fmt.Errorf("%w: more than %d shallows", errTooLarge, maxShallows)
			}
			req.shallows = append(req.shallows, h)
		case verb == "deepen" && section == 0:
			n, err := strconv.Atoi(arg)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("malformed deepen %q", line)
			}
			req.depth = n
		case verb == "deepen-since" || verb == "deepen-not" || verb == "filter":
			return nil, fmt.Errorf("%s is not supported: fetch with --depth N", verb)
		case verb == "have":
			h, ok := parseHash(arg)
			if !ok {
				return nil, fmt.Errorf("malformed have %q", line)
			}
			if len(req.haves) == maxHaves {
				return nil, fmt.Errorf("%w: more than %d haves; the view's history is linear, a fetch needs a few", errTooLarge, maxHaves)
			}
			req.haves = append(req.haves, h)
		case line == "done":
			req.done = true
		default:
			return nil, fmt.Errorf("unexpected %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(req.wants) == 0 {
		return nil, errors.New("no want")
	}
	return req, nil
}

// uploadPack answers one POST git-upload-pack: shallow lines, the
// negotiation's ACKs and NAKs, and the pack when the client is done or the
// server is ready (no-done). Its answers follow git's upload-pack in
// stateless RPC mode; history being linear, the pack is the commits after
// the newest one the client has, up to the newest it wants.
func (v *View) uploadPack(w http.ResponseWriter, r *http.Request, app string) {
	body := io.Reader(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, "the request body is not gzip: "+err.Error(), http.StatusBadRequest)
			return
		}
		defer gz.Close()
		// Capped again once inflated: a small gzip body of millions of
		// lines is refused, not parsed.
		body = http.MaxBytesReader(w, gz, maxRequestBytes)
	}
	req, err := parseRequest(bufio.NewReader(body))
	var maxBytes *http.MaxBytesError
	switch {
	case errors.As(err, &maxBytes):
		http.Error(w, fmt.Sprintf("upload-pack request refused: the body is over %d bytes, as sent or decompressed", maxRequestBytes), http.StatusBadRequest)
		return
	case errors.Is(err, errTooLarge):
		http.Error(w, "upload-pack request refused: "+err.Error(), http.StatusBadRequest)
		return
	case err != nil:
		http.Error(w, "malformed upload-pack request: "+err.Error(), http.StatusBadRequest)
		return
	}
	s, err := v.latest(r.Context(), app)
	if err != nil {
		v.fail(w, app, err)
		return
	}
	// A want of a release newer than this replica's snapshot: another
	// replica answered info/refs.
	if !s.hasAll(req.wants) {
		if s, err = v.current(r.Context(), app); err != nil {
			v.fail(w, app, err)
			return
		}
	}
	w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
	w.Header().Set("Cache-Control", "no-cache")
	out := pktline.NewEncoder(w)
	for _, h := range req.wants {
		if _, ok := s.find(h); !ok {
			// A commit of another app's view, or of no view at all.
			out.EncodeString(fmt.Sprintf("ERR upload-pack: not our ref %s: %s has no such release\n", h, app))
			return
		}
	}
	if err := v.negotiate(r.Context(), w, out, s, req); err != nil {
		v.log.Warn("git view: upload-pack failed", "app", app, "error", err)
	}
}

func (s *snapshot) hasAll(hs []plumbing.Hash) bool {
	for _, h := range hs {
		if _, ok := s.find(h); !ok {
			return false
		}
	}
	return true
}

func (v *View) negotiate(ctx context.Context, w io.Writer, out *pktline.Encoder, s *snapshot, req *request) error {
	newestWant := -1
	for _, h := range req.wants {
		i, _ := s.find(h)
		newestWant = max(newestWant, i)
	}
	// What the client has: the commits up to its newest common one, from
	// its shallow boundary if it is shallow.
	hasFrom, hasTo := 0, -1
	for _, h := range req.shallows {
		if i, ok := s.find(h); ok {
			hasFrom = max(hasFrom, i)
		}
	}
	if req.depth > 0 {
		from := max(newestWant-req.depth+1, 0)
		if from > 0 {
			out.EncodeString("shallow " + s.entries[from].commit.String() + "\n")
		}
		for _, h := range req.shallows {
			if i, ok := s.find(h); ok && i > from {
				out.EncodeString("unshallow " + h.String() + "\n")
			}
		}
		out.Flush()
		if len(req.haves) == 0 && !req.done {
			// The first request of a deepening fetch: the shallow list is
			// the whole answer.
			return nil
		}
	}
	multiAck := 0
	switch {
	case req.caps.Supports(capability.MultiACKDetailed):
		multiAck = 2
	case req.caps.Supports(capability.MultiACK):
		multiAck = 1
	}
	var last plumbing.Hash
	common := 0
	ready := false
	for _, h := range req.haves {
		if i, ok := s.find(h); ok {
			hasTo = max(hasTo, i)
			common++
			last = h
			switch multiAck {
			case 2:
				out.EncodeString("ACK " + h.String() + " common\n")
			case 1:
				out.EncodeString("ACK " + h.String() + " continue\n")
			default:
				if common == 1 {
					out.EncodeString("ACK " + h.String() + "\n")
				}
			}
			continue
		}
		// Linear history: one common commit is enough to make a pack.
		if multiAck > 0 && common > 0 {
			ready = multiAck == 2
			if ready {
				out.EncodeString("ACK " + h.String() + " ready\n")
			} else {
				out.EncodeString("ACK " + h.String() + " continue\n")
			}
		}
	}
	if !req.done {
		if multiAck == 2 && common > 0 && !ready {
			ready = true
			out.EncodeString("ACK " + last.String() + " ready\n")
		}
		if common == 0 || multiAck > 0 {
			out.EncodeString("NAK\n")
		}
		if !(ready && req.caps.Supports(capability.NoDone)) {
			return nil // the client sends more haves, or done, in its next request
		}
		out.EncodeString("ACK " + last.String() + "\n")
	} else if common > 0 {
		if multiAck > 0 {
			out.EncodeString("ACK " + last.String() + "\n")
		}
	} else {
		out.EncodeString("NAK\n")
	}
	return v.pack(w, out, s, req, hasFrom, hasTo, newestWant)
}

// pack sends the objects of the commits the client wants and lacks.
func (v *View) pack(w io.Writer, out *pktline.Encoder, s *snapshot, req *request, hasFrom, hasTo, newestWant int) error {
	from := 0
	if req.depth > 0 {
		from = max(newestWant-req.depth+1, 0)
	}
	var hashes []plumbing.Hash
	for i := from; i <= newestWant; i++ {
		if i >= hasFrom && i <= hasTo {
			continue
		}
		e := s.entries[i]
		hashes = append(hashes, e.commit, e.tree, e.blob)
	}
	dst := w
	var mux *sideband.Muxer
	switch {
	case req.caps.Supports(capability.Sideband64k):
		mux = sideband.NewMuxer(sideband.Sideband64k, w)
	case req.caps.Supports(capability.Sideband):
		mux = sideband.NewMuxer(sideband.Sideband, w)
	}
	if mux != nil {
		dst = mux
	}
	if _, err := packfile.NewEncoder(dst, s.chain.objects, false).Encode(hashes, 0); err != nil {
		if mux != nil {
			mux.WriteChannel(sideband.ErrorMessage, []byte("pack: "+err.Error()))
		}
		return err
	}
	if mux != nil {
		return out.Flush()
	}
	return nil
}
