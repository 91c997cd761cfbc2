package main

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
)

// Contender ids, in the order of the report's columns.
const (
	idBucketops  = "bucketops"
	idGitClone   = "git-clone"
	idGitQueue   = "git-queue"
	idGitWorkdir = "git-workdir"
)

var contenderIDs = []string{idBucketops, idGitClone, idGitQueue, idGitWorkdir}

// contenderNames are the labels of the report and the chart.
var contenderNames = map[string]string{
	idBucketops:  "bucketops",
	idGitClone:   "git: clone, push, rebase on rejection",
	idGitQueue:   "git: serialized queue (pubsub2git)",
	idGitWorkdir: "git: kept working copy",
}

// contender is one way of storing releases. Open gives a fresh store
// holding history prior releases, spread round-robin over apps; each
// workload opens its own.
type contender interface {
	Open(ctx context.Context, apps []string, history int, size int) (target, error)
}

// target is one contender's store during one workload.
type target interface {
	// Writer returns one pipeline's publisher, used by one goroutine.
	Writer(ctx context.Context) (writer, error)
	// State returns the bytes of app's current release and how many
	// releases of app the store holds.
	State(ctx context.Context, app string) (data []byte, releases int, err error)
	// Size returns the bytes the store holds: as written, and after the
	// store's own compaction (git gc); both are equal for a bucket.
	Size(ctx context.Context) (plain, packed int64, err error)
	Close() error
}

// writer publishes releases as one CI pipeline does.
type writer interface {
	Publish(ctx context.Context, app string, seq uint64, data []byte) (outcome, error)
	Close() error
}

// outcome is what one publish did.
type outcome struct {
	// Dropped: the release was not published because the app already had a
	// release with a higher sequence (bucketops' ErrStale, the same rule
	// for the git writers).
	Dropped bool
	// Retries counts rejected writes (a 412, a rejected push) before the
	// outcome.
	Retries int
}

// requestCounter is implemented by targets that count their requests and
// the writes they refused; the workload then takes its retries from
// Rejections rather than from the writers' outcomes.
type requestCounter interface {
	Requests() int64
	Rejections() int64
}

// prior is one release written before a workload starts.
type prior struct {
	App string
	Seq uint64
}

// priors spreads history releases round-robin over apps, with sequences
// counting from 1 in each app.
func priors(apps []string, history int) []prior {
	seq := make(map[string]uint64, len(apps))
	out := make([]prior, 0, history)
	for i := range history {
		app := apps[i%len(apps)]
		seq[app]++
		out = append(out, prior{App: app, Seq: seq[app]})
	}
	return out
}

// minManifestBytes is the smallest release manifest can make.
const minManifestBytes = 1024

// manifest returns release seq of app: about size bytes of YAML, a
// Deployment and a ConfigMap. Each release changes what a CI release
// changes: the image tag, a build annotation, and a few configuration
// values (each value changes once every 200 releases, staggered: about 8
// values per release of 50 KiB).
func manifest(app string, seq uint64, size int) []byte {
	h := fnv.New64a()
	h.Write([]byte(app))
	appHash := h.Sum64()
	var b bytes.Buffer
	b.Grow(size + 64)
	fmt.Fprintf(&b, "# bucketops-bench app=%s sequence=%d\n", app, seq)
	name := fmt.Sprintf("app-%x", appHash&0xffffff)
	fmt.Fprintf(&b, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  annotations:
    ci.example.com/build: "%[2]d"
spec:
  replicas: 3
  selector:
    matchLabels:
      app: %[1]s
  template:
    metadata:
      labels:
        app: %[1]s
    spec:
      containers:
        - name: %[1]s
          image: registry.example.com/%[1]s:1.%[2]d.0
          envFrom:
            - configMapRef:
                name: %[1]s
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: %[1]s
data:
`, name, seq)
	const row = len(`  key-00000: "0123456789abcdef"` + "\n")
	const period = 200
	for i := 0; b.Len()+row <= size; i++ {
		offset := mix(appHash^uint64(i)) % period
		epoch := (seq + offset) / period
		fmt.Fprintf(&b, "  key-%05d: \"%016x\"\n", i%100000, mix(appHash+uint64(i)*0x9e3779b97f4a7c15+epoch))
	}
	return b.Bytes()
}

// mix is splitmix64's finalizer: well-spread values from a counter.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// manifestSeq returns the sequence in a release's first line, or false.
func manifestSeq(data []byte) (uint64, bool) {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	_, v, ok := bytes.Cut(line, []byte(" sequence="))
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(string(v), 10, 64)
	return n, err == nil
}
