// Package integration holds the end-to-end tests, behind the build tag e2e
// so that make test and the main module's dependencies stay as they are:
// make e2e builds a real Argo CD, kube-apiserver, kube-controller-manager
// and etcd from the Go module proxy through wrapper modules (cached by
// version in ~/.cache/bucketops-e2e, or $BUCKETOPS_E2E_CACHE), starts them
// with redis, argocd-cmp-server running deploy/kubernetes' plugin.yaml with
// our bucketops binary, and our bridge in local mode, all on loopback, and
// asserts what the API server holds after each scenario.
package integration
