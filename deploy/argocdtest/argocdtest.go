// Package argocdtest is a fake Argo CD API server for tests: Argo CD's own
// generated gRPC service (application.ApplicationServiceServer) on a
// loopback port, reached through Argo CD's own client. It keeps
// Applications in memory, streams their changes to watchers as
// argocd-server does, records refreshes, syncs and requests for
// manifests, and answers them with scripted outcomes. With Resolve it resolves an Application's
// targetRevision on each refresh, as the repo-server does (LsRemote does it
// the way Argo CD does, with go-git against the bridge's git view).
//
// Argo CD's status times (reconciledAt, an operation's startedAt and
// finishedAt) are metav1.Time: they cross the wire with one-second
// precision, as with a real Argo CD.
package argocdtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"github.com/argoproj/argo-cd/v2/pkg/apiclient/version"
	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v2/reposerver/apiclient"
	"github.com/argoproj/gitops-engine/pkg/health"
	synccommon "github.com/argoproj/gitops-engine/pkg/sync/common"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/bucketops/bucketops/deploy"
)

// Namespace is the control-plane namespace Applications live in by default.
const Namespace = "argocd"

// Call is one recorded refresh, sync or request for manifests.
type Call struct {
	// Method is "refresh", "sync" or "manifests".
	Method    string
	Name      string
	Namespace string
	Prune     bool
	At        time.Time
	// Peer is the caller's address (host:port).
	Peer string
	// Generation is, for a refresh or a sync, what the function given to
	// RecordGeneration returned: the generation Argo CD would have rendered.
	Generation int64
	// Refresh is the refresh's type: "normal" or "hard".
	Refresh string
	// Revision is, for a refresh or a sync, the revision it resolved
	// (Resolve); for manifests, the revision asked for.
	Revision string
	// Retries is, for a sync, how often its operation would be retried,
	// as argocd-server decides it: the request's retry strategy, else the
	// Application's syncPolicy.retry, else none.
	Retries int64
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	addr string

	mu       sync.Mutex
	token    string
	apps     map[string]*v1alpha1.Application // by namespace/name
	version  int
	calls    []Call
	lists    int
	watches  int
	watchers map[chan *v1alpha1.ApplicationWatchEvent]struct{}
	// listSubscribeGap: BetweenListAndSubscribe.
	listSubscribeGap func()
	onRefresh        func(*v1alpha1.Application)
	renders          func(*v1alpha1.Application) int64
	resolve          func(*v1alpha1.Application) (string, error)
	onSync           func(*v1alpha1.Application, *application.ApplicationSyncRequest) error
	fail             map[string]failure
	delay            map[string]time.Duration
}

type failure struct {
	code codes.Code
	n    int
}

// New starts a fake Argo CD on 127.0.0.1, stopped when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	return Listen(t, "127.0.0.1:0")
}

// Listen starts a fake Argo CD on addr (host:port, port 0 for a free one),
// for bridges that can't reach loopback: in containers, addr is the host's
// address on their network.
func Listen(t testing.TB, addr string) *Server {
	t.Helper()
	secret := make([]byte, 16)
	rand.Read(secret)
	s := &Server{
		token:    hex.EncodeToString(secret),
		apps:     map[string]*v1alpha1.Application{},
		watchers: map[chan *v1alpha1.ApplicationWatchEvent]struct{}{},
		fail:     map[string]failure{},
		delay:    map[string]time.Duration{},
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	gs := grpc.NewServer(grpc.UnaryInterceptor(s.authUnary), grpc.StreamInterceptor(s.authStream))
	application.RegisterApplicationServiceServer(gs, &service{s: s})
	// argocd's apiclient asks for the version when it connects, and falls
	// back to gRPC-web (a proxy on a unix socket in TMPDIR) if that fails.
	version.RegisterVersionServiceServer(gs, versionService{})
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	return s
}

// Addr is host:port of the fake's gRPC API (plaintext).
func (s *Server) Addr() string { return s.addr }

// Token is the bearer token the fake accepts.
func (s *Server) Token() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.token
}

// Rotate makes the fake accept only a new token, as when an Argo CD
// project token expires and a new one is issued, and returns it.
func (s *Server) Rotate() string {
	secret := make([]byte, 16)
	rand.Read(secret)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = hex.EncodeToString(secret)
	return s.token
}

// ArgoCD returns the bridge's settings for the fake, with the token in a
// file of the test's temporary directory.
func (s *Server) ArgoCD(t testing.TB) deploy.ArgoCD {
	t.Helper()
	path := filepath.Join(t.TempDir(), "argocd.token")
	if err := os.WriteFile(path, []byte(s.Token()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return deploy.ArgoCD{Server: s.addr, TokenFile: path, PlainText: true}
}

// Client returns Argo CD's application client connected to the fake
// through Argo CD's apiclient, as the bridge connects.
func (s *Server) Client(t testing.TB) application.ApplicationServiceClient {
	t.Helper()
	c, closer, err := s.ArgoCD(t).Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	return c
}

func (s *Server) authorize(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	var got string
	if v := md.Get("authorization"); len(v) > 0 {
		got = strings.TrimPrefix(v[0], "Bearer ")
	} else if v := md.Get("token"); len(v) > 0 {
		got = v[0] // what Argo CD's own client sends
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(s.Token()))
	if subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
		return status.Error(codes.Unauthenticated, "invalid session: token is not valid")
	}
	return nil
}

func (s *Server) authUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := s.authorize(ctx); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (s *Server) authStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := s.authorize(ss.Context()); err != nil {
		return err
	}
	return h(srv, ss)
}

func key(namespace, name string) string {
	if namespace == "" {
		namespace = Namespace
	}
	return namespace + "/" + name
}

// PluginApp returns an Application whose source is the bucketops plugin
// with parameter app=bucketopsApp. Namespace "" is Argo CD's own.
func PluginApp(name, namespace, bucketopsApp string) *v1alpha1.Application {
	a := baseApp(name, namespace)
	a.Spec.Source.Plugin = &v1alpha1.ApplicationSourcePlugin{
		Name:       deploy.PluginName,
		Parameters: v1alpha1.ApplicationSourcePluginParameters{{Name: "app", String_: &bucketopsApp}},
	}
	return a
}

// PluginEnvApp is PluginApp naming the app with the plugin env entry
// BUCKETOPS_APP instead.
func PluginEnvApp(name, namespace, bucketopsApp string) *v1alpha1.Application {
	a := baseApp(name, namespace)
	a.Spec.Source.Plugin = &v1alpha1.ApplicationSourcePlugin{
		Name: deploy.PluginName,
		Env:  v1alpha1.Env{{Name: "BUCKETOPS_APP", Value: bucketopsApp}},
	}
	return a
}

func baseApp(name, namespace string) *v1alpha1.Application {
	if namespace == "" {
		namespace = Namespace
	}
	return &v1alpha1.Application{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1alpha1.ApplicationSpec{
			Project: "default",
			Source:  &v1alpha1.ApplicationSource{RepoURL: "https://git.example.com/apps.git", Path: ".", TargetRevision: "HEAD"},
			Destination: v1alpha1.ApplicationDestination{
				Server: "https://kubernetes.default.svc", Namespace: name,
			},
		},
		Status: v1alpha1.ApplicationStatus{
			Sync:   v1alpha1.SyncStatus{Status: v1alpha1.SyncStatusCodeUnknown},
			Health: v1alpha1.HealthStatus{Status: health.HealthStatusUnknown},
		},
	}
}

// BetweenListAndSubscribe runs f once, in the next Watch, after it has
// listed the Applications and before it subscribes to changes, as
// argocd-server's Watch leaves a gap there: an Application f creates
// reaches that watcher neither in the listing nor as an event.
func (s *Server) BetweenListAndSubscribe(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listSubscribeGap = f
}

// Put adds or replaces an Application and tells the watchers.
func (s *Server) Put(a *v1alpha1.Application) {
	a = a.DeepCopy()
	if a.Namespace == "" {
		a.Namespace = Namespace
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	typ := watch.Modified
	if _, ok := s.apps[key(a.Namespace, a.Name)]; !ok {
		typ = watch.Added
	}
	s.storeLocked(typ, a)
}

// Update changes an Application in place and tells the watchers.
func (s *Server) Update(namespace, name string, mutate func(*v1alpha1.Application)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.apps[key(namespace, name)]
	if !ok {
		panic("argocdtest: Update of unknown application " + key(namespace, name))
	}
	a = a.DeepCopy()
	mutate(a)
	s.storeLocked(watch.Modified, a)
}

// Delete removes an Application and tells the watchers.
func (s *Server) Delete(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.apps[key(namespace, name)]
	if !ok {
		return
	}
	delete(s.apps, key(namespace, name))
	s.broadcastLocked(watch.Deleted, a)
}

// App returns a copy of an Application, or nil.
func (s *Server) App(namespace, name string) *v1alpha1.Application {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.apps[key(namespace, name)]; ok {
		return a.DeepCopy()
	}
	return nil
}

func (s *Server) storeLocked(typ watch.EventType, a *v1alpha1.Application) {
	s.version++
	a.ResourceVersion = strconv.Itoa(s.version)
	s.apps[key(a.Namespace, a.Name)] = a
	s.broadcastLocked(typ, a)
}

func (s *Server) broadcastLocked(typ watch.EventType, a *v1alpha1.Application) {
	for ch := range s.watchers {
		ev := &v1alpha1.ApplicationWatchEvent{Type: typ, Application: *a.DeepCopy()}
		select {
		case ch <- ev:
		default:
			// A watcher that doesn't keep up is cut off, as argocd-server's
			// broadcaster does; it reconnects and relists.
			close(ch)
			delete(s.watchers, ch)
		}
	}
}

// RecordGeneration sets how a refresh learns the generation Argo CD
// would render for the Application (a real one asks the plugin, which asks
// the bridge for the head); it is recorded in the refresh's Call. It runs
// with the fake's lock held.
func (s *Server) RecordGeneration(f func(*v1alpha1.Application) int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renders = f
}

// Resolve sets how a refresh resolves the Application's targetRevision to
// the revision it compares (status.sync.revision); an error becomes a
// ComparisonError condition. It runs before OnRefresh, with the fake's
// lock held.
func (s *Server) Resolve(f func(*v1alpha1.Application) (string, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resolve = f
}

// OnRefresh sets what a refresh does to the Application; by default it
// sets reconciledAt.
func (s *Server) OnRefresh(f func(*v1alpha1.Application)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRefresh = f
}

// OnSync sets what a sync does; by default it succeeds: operation
// Succeeded, Synced, Healthy.
func (s *Server) OnSync(f func(*v1alpha1.Application, *application.ApplicationSyncRequest) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onSync = f
}

// FailNext makes the next n calls of method ("get", "sync", "list",
// "watch") fail with code.
func (s *Server) FailNext(method string, code codes.Code, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[method] = failure{code: code, n: n}
}

// Delay slows every call of method down by d.
func (s *Server) Delay(method string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay[method] = d
}

// Calls returns every recorded refresh and sync, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Refreshes returns the recorded refreshes.
func (s *Server) Refreshes() []Call { return s.only("refresh") }

// Syncs returns the recorded syncs.
func (s *Server) Syncs() []Call { return s.only("sync") }

func (s *Server) only(method string) []Call {
	var out []Call
	for _, c := range s.Calls() {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// ListCalls counts List calls; WatchCalls counts Watch calls.
func (s *Server) ListCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists
}

// WatchCalls counts Watch calls.
func (s *Server) WatchCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watches
}

// enter applies FailNext and Delay to a call of method.
func (s *Server) enter(ctx context.Context, method string) error {
	s.mu.Lock()
	d := s.delay[method]
	f := s.fail[method]
	fail := f.n > 0
	if fail {
		f.n--
		s.fail[method] = f
	}
	s.mu.Unlock()
	if d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	if fail {
		return status.Errorf(f.code, "argocdtest: scripted %s failure", method)
	}
	return nil
}

// service implements Argo CD's ApplicationService on the fake's state.
type service struct {
	application.UnimplementedApplicationServiceServer
	s *Server
}

func (v *service) List(ctx context.Context, q *application.ApplicationQuery) (*v1alpha1.ApplicationList, error) {
	s := v.s
	s.mu.Lock()
	s.lists++
	s.mu.Unlock()
	if err := s.enter(ctx, "list"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &v1alpha1.ApplicationList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(s.version)}}
	for _, a := range s.apps {
		if matches(q, a) {
			out.Items = append(out.Items, *a.DeepCopy())
		}
	}
	return out, nil
}

func matches(q *application.ApplicationQuery, a *v1alpha1.Application) bool {
	if q.GetName() != "" && q.GetName() != a.Name {
		return false
	}
	if q.GetAppNamespace() != "" && q.GetAppNamespace() != a.Namespace {
		return false
	}
	if len(q.GetProjects()) > 0 {
		found := false
		for _, p := range q.GetProjects() {
			found = found || p == a.Spec.Project
		}
		return found
	}
	return true
}

// Watch replays every matching Application as ADDED, then streams changes,
// as argocd-server does for a watch without a resource version.
func (v *service) Watch(q *application.ApplicationQuery, stream application.ApplicationService_WatchServer) error {
	s := v.s
	s.mu.Lock()
	s.watches++
	s.mu.Unlock()
	if err := s.enter(stream.Context(), "watch"); err != nil {
		return err
	}
	ch := make(chan *v1alpha1.ApplicationWatchEvent, 1024)
	s.mu.Lock()
	var initial []*v1alpha1.ApplicationWatchEvent
	for _, a := range s.apps {
		if matches(q, a) {
			initial = append(initial, &v1alpha1.ApplicationWatchEvent{Type: watch.Added, Application: *a.DeepCopy()})
		}
	}
	gap := s.listSubscribeGap
	s.listSubscribeGap = nil
	if gap != nil {
		// argocd-server lists, then subscribes (server/application
		// Watch, 3.6): what changes in between reaches no watcher.
		s.mu.Unlock()
		gap()
		s.mu.Lock()
	}
	s.watchers[ch] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if _, ok := s.watchers[ch]; ok {
			delete(s.watchers, ch)
		}
		s.mu.Unlock()
	}()
	for _, ev := range initial {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case ev, ok := <-ch:
			if !ok {
				return status.Error(codes.ResourceExhausted, "argocdtest: watcher too slow")
			}
			if matches(q, &ev.Application) {
				if err := stream.Send(ev); err != nil {
					return err
				}
			}
		}
	}
}

// Get returns an Application; with refresh set it records the refresh and
// applies OnRefresh before answering, as argocd-server answers once the
// controller has refreshed.
func (v *service) Get(ctx context.Context, q *application.ApplicationQuery) (*v1alpha1.Application, error) {
	s := v.s
	a, err := s.enterApp(ctx, "get", q.GetAppNamespace(), q.GetName())
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if q.Refresh == nil {
		return a.DeepCopy(), nil
	}
	call := Call{Method: "refresh", Name: a.Name, Namespace: a.Namespace, At: time.Now(), Peer: peerAddr(ctx), Refresh: q.GetRefresh()}
	if s.renders != nil {
		call.Generation = s.renders(a)
	}
	a = a.DeepCopy()
	if s.resolve != nil {
		rev, err := s.resolve(a)
		if err != nil {
			a.Status.Conditions = []v1alpha1.ApplicationCondition{{Type: v1alpha1.ApplicationConditionComparisonError, Message: err.Error()}}
		} else {
			a.Status.Conditions = nil
			a.Status.Sync.Revision = rev
			call.Revision = rev
		}
	}
	s.calls = append(s.calls, call)
	if s.onRefresh != nil {
		s.onRefresh(a)
	} else {
		now := metav1.Now()
		a.Status.ReconciledAt = &now
	}
	s.storeLocked(watch.Modified, a)
	return a.DeepCopy(), nil
}

// Sync records the sync and applies OnSync.
func (v *service) Sync(ctx context.Context, req *application.ApplicationSyncRequest) (*v1alpha1.Application, error) {
	s := v.s
	a, err := s.enterApp(ctx, "sync", req.GetAppNamespace(), req.GetName())
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	// As argocd-server: an automated Application syncs to its own
	// targetRevision only, and the revision is resolved afresh (Resolve).
	if p := a.Spec.SyncPolicy; p != nil && p.Automated != nil && req.GetRevision() != "" && req.GetRevision() != cmpOr(a.Spec.GetSource().TargetRevision, "HEAD") {
		return nil, status.Errorf(codes.FailedPrecondition, "Cannot sync to %s: auto-sync currently set to %s", req.GetRevision(), cmpOr(a.Spec.GetSource().TargetRevision, "HEAD"))
	}
	call := Call{Method: "sync", Name: a.Name, Namespace: a.Namespace, Prune: req.GetPrune(), At: time.Now(), Peer: peerAddr(ctx)}
	switch {
	case req.RetryStrategy != nil:
		call.Retries = req.RetryStrategy.Limit
	case a.Spec.SyncPolicy != nil && a.Spec.SyncPolicy.Retry != nil:
		call.Retries = a.Spec.SyncPolicy.Retry.Limit
	}
	a = a.DeepCopy()
	if s.resolve != nil {
		rev, err := s.resolve(a)
		if err != nil {
			return nil, status.Errorf(codes.Unknown, "error resolving repo revision: %v", err)
		}
		a.Status.Sync.Revision = rev
		call.Revision = rev
	}
	if s.renders != nil {
		call.Generation = s.renders(a)
	}
	s.calls = append(s.calls, call)
	if s.onSync != nil {
		if err := s.onSync(a, req); err != nil {
			return nil, err
		}
	} else {
		now := metav1.Now()
		a.Status.OperationState = &v1alpha1.OperationState{
			Operation:  v1alpha1.Operation{Sync: &v1alpha1.SyncOperation{Prune: req.GetPrune(), Revision: a.Status.Sync.Revision}},
			Phase:      synccommon.OperationSucceeded,
			Message:    "successfully synced (all tasks run)",
			StartedAt:  now,
			FinishedAt: &now,
			SyncResult: &v1alpha1.SyncOperationResult{Revision: a.Status.Sync.Revision},
		}
		a.Status.Sync.Status = v1alpha1.SyncStatusCodeSynced
		a.Status.Health.Status = health.HealthStatusHealthy
		a.Status.ReconciledAt = &now
	}
	s.storeLocked(watch.Modified, a)
	return a.DeepCopy(), nil
}

// enterApp applies FailNext and Delay to a call of method about an
// Application, then finds it, answering as argocd-server does for one
// that doesn't exist. It returns with s.mu held, unless it fails.
func (s *Server) enterApp(ctx context.Context, method, namespace, name string) (*v1alpha1.Application, error) {
	if err := s.enter(ctx, method); err != nil {
		return nil, err
	}
	s.mu.Lock()
	a, ok := s.apps[key(namespace, name)]
	if !ok {
		s.mu.Unlock()
		return nil, status.Errorf(codes.NotFound, "applications.argoproj.io %q not found", name)
	}
	return a, nil
}

// GetManifests records a request for an Application's manifests (Method
// "manifests", Revision the revision asked for) and answers with none;
// FailNext("manifests", …) and Delay("manifests", …) script it.
func (v *service) GetManifests(ctx context.Context, q *application.ApplicationManifestQuery) (*apiclient.ManifestResponse, error) {
	s := v.s
	a, err := s.enterApp(ctx, "manifests", q.GetAppNamespace(), q.GetName())
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	s.calls = append(s.calls, Call{Method: "manifests", Name: a.Name, Namespace: a.Namespace, At: time.Now(), Peer: peerAddr(ctx), Revision: q.GetRevision()})
	return &apiclient.ManifestResponse{Revision: q.GetRevision()}, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// versionService answers as argocd-server's version service does.
type versionService struct{}

func (versionService) Version(context.Context, *emptypb.Empty) (*version.VersionMessage, error) {
	return &version.VersionMessage{Version: "v2.14.21+argocdtest"}, nil
}

// peerAddr is the caller's address, or "" when gRPC doesn't know it.
func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// String describes the fake for failure messages.
func (s *Server) String() string { return fmt.Sprintf("fake Argo CD at %s", s.addr) }

// Deployed records a successful sync of revision in the Application's
// history, as Argo CD's controller does: a new entry with the next ID,
// the oldest dropped beyond spec.revisionHistoryLimit (default 10). For
// OnSync functions that want Argo CD's record.
func Deployed(a *v1alpha1.Application, revision string, started, deployed time.Time) {
	var id int64
	if n := len(a.Status.History); n > 0 {
		id = a.Status.History[n-1].ID
	}
	s := metav1.NewTime(started)
	a.Status.History = append(a.Status.History, v1alpha1.RevisionHistory{
		ID: id + 1, Revision: revision, DeployStartedAt: &s, DeployedAt: metav1.NewTime(deployed), Source: a.Spec.GetSource(),
	})
	if limit := a.Spec.GetRevisionHistoryLimit(); len(a.Status.History) > limit {
		a.Status.History = a.Status.History[len(a.Status.History)-limit:]
	}
}
