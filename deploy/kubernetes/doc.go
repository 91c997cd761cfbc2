// Package kubernetes holds the Kubernetes install of bucketops as kustomize
// directories: the bridge and the plugin's configuration in base/, the
// argocd-repo-server sidecar as a component in repo-server-sidecar/, and
// examples/. It has no Go code; its test builds every kustomization the way
// kubectl apply -k does and checks the objects a user would get.
package kubernetes
