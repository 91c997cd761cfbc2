package kubernetes_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"gopkg.in/yaml.v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/bucketops/bucketops/deploy"
)

// The objects below hold only the fields the tests read; encoding/json matches
// the manifests' camelCase keys to them without tags.
type (
	meta struct {
		Name        string
		Namespace   string
		Labels      map[string]string
		Annotations map[string]string
	}
	deployment struct {
		Metadata meta
		Spec     struct {
			Selector struct{ MatchLabels map[string]string }
			Template struct {
				Metadata meta
				Spec     podSpec
			}
		}
	}
	podSpec struct {
		ServiceAccountName           string
		AutomountServiceAccountToken *bool
		SecurityContext              securityContext
		InitContainers               []container
		Containers                   []container
		Volumes                      []volume
	}
	container struct {
		Name            string
		Image           string
		Command         []string
		Args            []string
		Env             []envVar
		Ports           []containerPort
		LivenessProbe   *probe
		ReadinessProbe  *probe
		Resources       struct{ Requests, Limits map[string]string }
		SecurityContext *securityContext
		VolumeMounts    []volumeMount
	}
	containerPort struct {
		Name          string
		ContainerPort int
	}
	securityContext struct {
		RunAsNonRoot             *bool
		RunAsUser                *int64
		ReadOnlyRootFilesystem   *bool
		AllowPrivilegeEscalation *bool
		Capabilities             struct{ Drop []string }
		SeccompProfile           struct{ Type string }
	}
	probe struct {
		HTTPGet *struct {
			Path string
			Port any
		}
	}
	envVar struct {
		Name      string
		Value     string
		ValueFrom *struct {
			ConfigMapKeyRef *struct{ Name, Key string }
		}
	}
	volumeMount struct {
		Name      string
		MountPath string
		SubPath   string
		ReadOnly  bool
	}
	volume struct {
		Name   string
		Secret *struct {
			SecretName string
			Items      []keyToPath
		}
		ConfigMap *struct {
			Name  string
			Items []keyToPath
		}
		EmptyDir *struct{}
		// Sources counts the volume sources set, whatever their type.
		Sources int `json:"-"`
	}
	keyToPath struct{ Key, Path string }
	service   struct {
		Metadata meta
		Spec     struct {
			Selector map[string]string
			Ports    []struct {
				Name       string
				Port       int
				TargetPort any
			}
		}
	}
	networkPolicy struct {
		Spec struct {
			PodSelector struct{ MatchLabels map[string]string }
			PolicyTypes []string
			Ingress     []struct {
				From  []map[string]any
				Ports []struct{ Port any }
			}
		}
	}
	configMap struct {
		Metadata meta
		Data     map[string]string
	}
	// pluginConfig is argocd-cmp-server's ConfigManagementPlugin (Argo CD v2.14 to v3.6,
	// cmpserver/plugin.PluginConfig).
	pluginConfig struct {
		APIVersion string
		Kind       string
		Metadata   meta
		Spec       struct {
			Version    string
			Init       map[string]any
			Generate   struct{ Command, Args []string }
			Discover   map[string]any
			Parameters struct {
				Static []struct {
					Name, Title, Tooltip string
					Required             bool
				}
			}
		}
	}
	application struct {
		Metadata meta
		Spec     struct {
			Source struct {
				RepoURL, TargetRevision, Path string
				Plugin                        *struct {
					Name       string
					Parameters []struct{ Name, String string }
					Env        []struct{ Name, Value string }
				}
			}
			Destination struct{ Server, Namespace string }
			SyncPolicy  struct {
				Automated *struct{ Prune, SelfHeal, AllowEmpty bool }
			}
		}
	}
)

func (v *volume) UnmarshalJSON(b []byte) error {
	type plain volume
	if err := json.Unmarshal(b, (*plain)(v)); err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return err
	}
	v.Sources = len(fields) - 1 // all but name
	return nil
}

func (p podSpec) volume(name string) *volume {
	for i := range p.Volumes {
		if p.Volumes[i].Name == name {
			return &p.Volumes[i]
		}
	}
	return nil
}

func (p podSpec) container(name string) *container {
	for i := range p.Containers {
		if p.Containers[i].Name == name {
			return &p.Containers[i]
		}
	}
	return nil
}

func (c container) env(name string) *envVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func (c container) mountAt(mountPath string) *volumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == mountPath {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

// secretFile says which Secret key the container reads at file, the way the
// kubelet lays out a Secret volume: every key, or only the listed items.
func (p podSpec) secretFile(c container, file string) (secret, key string, ok bool) {
	for _, m := range c.VolumeMounts {
		rel, found := strings.CutPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !found || m.SubPath != "" {
			continue
		}
		v := p.volume(m.Name)
		if v == nil || v.Secret == nil {
			continue
		}
		if len(v.Secret.Items) == 0 {
			return v.Secret.SecretName, rel, true
		}
		for _, it := range v.Secret.Items {
			if it.Path == rel {
				return v.Secret.SecretName, it.Key, true
			}
		}
	}
	return "", "", false
}

// output is what kubectl apply -k would send to the API server.
type output []*resource.Resource

func build(t *testing.T, dir string) output {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return m.Resources()
}

// decode finds the object kind/name and decodes it into v.
func (o output) decode(t *testing.T, kind, name string, v any) {
	t.Helper()
	for _, r := range o {
		if r.GetKind() != kind || r.GetName() != name {
			continue
		}
		b, err := r.MarshalJSON()
		if err != nil {
			t.Fatalf("%s/%s: %v", kind, name, err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s/%s: %v", kind, name, err)
		}
		return
	}
	t.Fatalf("no %s/%s in the output; it has %v", kind, name, o.ids())
}

func (o output) ids() []string {
	var ids []string
	for _, r := range o {
		ids = append(ids, r.GetKind()+"/"+r.GetName())
	}
	return ids
}

// fromYAML decodes YAML through JSON, so that the same untagged types serve.
func fromYAML(t *testing.T, what string, data []byte, v any) {
	t.Helper()
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func bridgePod(t *testing.T, o output) (deployment, container) {
	t.Helper()
	var d deployment
	o.decode(t, "Deployment", "bucketops-bridge", &d)
	c := d.Spec.Template.Spec.container("bridge")
	if c == nil {
		t.Fatalf("the bridge Deployment has no container named bridge")
	}
	return d, *c
}

// bucketOf follows the bridge's --bucket argument to the ConfigMap it comes from.
func bucketOf(t *testing.T, o output) string {
	t.Helper()
	_, c := bridgePod(t, o)
	if !slices.Contains(c.Args, "--bucket=$(BUCKETOPS_BUCKET)") {
		t.Fatalf("the bridge's args %q don't take --bucket from BUCKETOPS_BUCKET", c.Args)
	}
	e := c.env("BUCKETOPS_BUCKET")
	if e == nil || e.ValueFrom == nil || e.ValueFrom.ConfigMapKeyRef == nil {
		t.Fatalf("BUCKETOPS_BUCKET doesn't come from a ConfigMap: %+v", e)
	}
	var cm configMap
	o.decode(t, "ConfigMap", e.ValueFrom.ConfigMapKeyRef.Name, &cm)
	bucket, ok := cm.Data[e.ValueFrom.ConfigMapKeyRef.Key]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %s", cm.Metadata.Name, e.ValueFrom.ConfigMapKeyRef.Key)
	}
	return bucket
}

func TestBase(t *testing.T) {
	out := build(t, "base")

	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"the base yields the bridge and the plugin's configuration, all in namespace argocd", func(t *testing.T) {
			want := []string{
				"ServiceAccount/bucketops-bridge",
				"Deployment/bucketops-bridge",
				"PodDisruptionBudget/bucketops-bridge",
				"Service/bucketops-bridge",
				"NetworkPolicy/bucketops-bridge",
				"Role/bucketops-bridge-applicationsets",
				"RoleBinding/bucketops-bridge-applicationsets",
				"ConfigMap/bucketops-bridge-*", // the generator's content hash
				"ConfigMap/bucketops-cmp-plugin",
				"ConfigMap/bucketops-generator",
			}
			got := out.ids()
			if len(got) != len(want) {
				t.Fatalf("objects = %v, want %v", got, want)
			}
			for _, pattern := range want {
				if !slices.ContainsFunc(got, func(id string) bool { ok, _ := path.Match(pattern, id); return ok }) {
					t.Errorf("no object matches %s in %v", pattern, got)
				}
			}
			for _, r := range out {
				if r.GetNamespace() != "argocd" {
					t.Errorf("%s/%s is in namespace %q, want argocd", r.GetKind(), r.GetName(), r.GetNamespace())
				}
			}
		}},
		{"two bridge replicas, at most one down at a time", func(t *testing.T) {
			var d struct {
				Spec struct {
					Replicas int
					Template struct {
						Metadata struct{ Labels map[string]string }
					}
				}
			}
			out.decode(t, "Deployment", "bucketops-bridge", &d)
			var pdb struct {
				Spec struct {
					MinAvailable int
					Selector     struct{ MatchLabels map[string]string }
				}
			}
			out.decode(t, "PodDisruptionBudget", "bucketops-bridge", &pdb)
			if d.Spec.Replicas < 2 || pdb.Spec.MinAvailable != 1 {
				t.Errorf("replicas %d, PodDisruptionBudget minAvailable %d; want 2 or more, and 1", d.Spec.Replicas, pdb.Spec.MinAvailable)
			}
			for k, v := range pdb.Spec.Selector.MatchLabels {
				if d.Spec.Template.Metadata.Labels[k] != v {
					t.Errorf("the PodDisruptionBudget selects %s=%s, which the bridge's pods don't carry", k, v)
				}
			}
		}},
		{"the bridge runs as a non-root user with a read-only root filesystem and no capabilities", func(t *testing.T) {
			d, c := bridgePod(t, out)
			sc := c.SecurityContext
			if sc == nil {
				t.Fatal("the bridge container has no securityContext")
			}
			if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
				t.Errorf("runAsNonRoot = %v, runAsUser = %v; want true and 65532", deref(sc.RunAsNonRoot), deref(sc.RunAsUser))
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Error("the root filesystem is writable")
			}
			// Argo CD's apiclient exits the process when it can't make
			// its gRPC-web socket in /tmp (argocd-server down at connect).
			if m := c.mountAt("/tmp"); m == nil {
				t.Error("nothing is mounted at /tmp: the bridge dies when argocd-server is unreachable at connect")
			} else if v := d.Spec.Template.Spec.volume(m.Name); v == nil || v.EmptyDir == nil {
				t.Errorf("/tmp is volume %+v, want an emptyDir", v)
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Error("privilege escalation isn't turned off")
			}
			if !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
				t.Errorf("capabilities dropped = %v, want [ALL]", sc.Capabilities.Drop)
			}
			if sc.SeccompProfile.Type != "RuntimeDefault" {
				t.Errorf("seccompProfile = %q, want RuntimeDefault", sc.SeccompProfile.Type)
			}
			// The token is for the ApplicationSet refresher, whose Role
			// is checked below.
			if a := d.Spec.Template.Spec.AutomountServiceAccountToken; a == nil || !*a {
				t.Error("the pod mounts no Kubernetes API token: the ApplicationSet refresher can't run")
			}
		}},
		{"the bridge listens on port http, probed at /healthz for liveness and /readyz for readiness", func(t *testing.T) {
			_, c := bridgePod(t, out)
			if !slices.ContainsFunc(c.Ports, func(p containerPort) bool {
				return p.Name == "http" && p.ContainerPort == 8080
			}) {
				t.Errorf("ports = %+v, want http on 8080", c.Ports)
			}
			if !slices.Contains(c.Args, "--listen=0.0.0.0:8080") {
				t.Errorf("args %q don't listen on 0.0.0.0:8080", c.Args)
			}
			for _, p := range []struct {
				kind  string
				probe *probe
				path  string
			}{
				{"liveness", c.LivenessProbe, "/healthz"},
				{"readiness", c.ReadinessProbe, "/readyz"},
			} {
				if p.probe == nil || p.probe.HTTPGet == nil {
					t.Errorf("no HTTP %s probe", p.kind)
					continue
				}
				if p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port != "http" {
					t.Errorf("%s probe = GET %s on port %v, want %s on http", p.kind, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port, p.path)
				}
			}
		}},
		{"the bridge has no writable volume but /tmp, only Secrets mounted read-only", func(t *testing.T) {
			d, c := bridgePod(t, out)
			pod := d.Spec.Template.Spec
			tmp := c.mountAt("/tmp")
			for _, v := range pod.Volumes {
				if tmp != nil && v.Name == tmp.Name {
					continue // an emptyDir, checked above
				}
				if v.Secret == nil || v.Sources != 1 {
					t.Errorf("volume %s isn't just a Secret", v.Name)
				}
			}
			for _, m := range c.VolumeMounts {
				if !m.ReadOnly && m.MountPath != "/tmp" {
					t.Errorf("%s is mounted writable at %s", m.Name, m.MountPath)
				}
			}
			if len(c.VolumeMounts) == 0 {
				t.Error("the bridge mounts no Secrets at all")
			}
		}},
		{"the bridge reads its token files and age keys from the Secrets' keys", func(t *testing.T) {
			d, c := bridgePod(t, out)
			want := map[string][2]string{
				"--token-file=plugin=/var/run/bucketops/tokens/plugin":       {"bucketops-bridge-tokens", "plugin"},
				"--token-file=reader=/var/run/bucketops/tokens/reader":       {"bucketops-bridge-tokens", "reader"},
				"--token-file=generator=/var/run/bucketops/tokens/generator": {"bucketops-bridge-tokens", "generator"},
				"--age-key-file=/var/run/bucketops/age/keys.txt":             {"bucketops-age-keys", "keys.txt"},
			}
			for arg, src := range want {
				if !slices.Contains(c.Args, arg) {
					t.Errorf("args %q lack %s", c.Args, arg)
					continue
				}
				file := arg[strings.LastIndex(arg, "=")+1:]
				secret, key, ok := d.Spec.Template.Spec.secretFile(c, file)
				if !ok || secret != src[0] || key != src[1] {
					t.Errorf("%s is Secret %q key %q (found %v), want %s key %s", file, secret, key, ok, src[0], src[1])
				}
			}
		}},
		{"the bridge may list and patch ApplicationSets in argocd, nothing else", func(t *testing.T) {
			var role struct {
				Rules []struct{ APIGroups, Resources, Verbs, ResourceNames []string }
			}
			out.decode(t, "Role", "bucketops-bridge-applicationsets", &role)
			if len(role.Rules) != 1 {
				t.Fatalf("rules %+v, want one", role.Rules)
			}
			r := role.Rules[0]
			if !slices.Equal(r.APIGroups, []string{"argoproj.io"}) || !slices.Equal(r.Resources, []string{"applicationsets"}) || !slices.Equal(r.Verbs, []string{"list", "patch"}) {
				t.Errorf("rule %+v, want list and patch on argoproj.io applicationsets", r)
			}
			var rb struct {
				RoleRef  struct{ Kind, Name string }
				Subjects []struct{ Kind, Name string }
			}
			out.decode(t, "RoleBinding", "bucketops-bridge-applicationsets", &rb)
			if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != "bucketops-bridge-applicationsets" || len(rb.Subjects) != 1 || rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != "bucketops-bridge" {
				t.Errorf("role binding %+v, want the Role bound to the bridge's ServiceAccount", rb)
			}
		}},
		{"the generator's ConfigMap points Argo CD at the bridge's Service with the generator token", func(t *testing.T) {
			var cm struct{ Data map[string]string }
			out.decode(t, "ConfigMap", "bucketops-generator", &cm)
			if cm.Data["baseUrl"] != "http://bucketops-bridge.argocd.svc:8080" {
				t.Errorf("baseUrl %q", cm.Data["baseUrl"])
			}
			// The Secret and key the bridge reads its generator token from.
			if cm.Data["token"] != "$bucketops-bridge-tokens:generator" {
				t.Errorf("token %q, want $bucketops-bridge-tokens:generator", cm.Data["token"])
			}
		}},
		{"the bridge's bucket is a placeholder it rejects until an overlay sets it", func(t *testing.T) {
			if got := bucketOf(t, out); got != "gs://BUCKET" {
				t.Errorf("bucket = %q, want the placeholder gs://BUCKET", got)
			}
		}},
		{"the bridge asks for CPU and memory and is capped in memory", func(t *testing.T) {
			_, c := bridgePod(t, out)
			for _, r := range []string{"cpu", "memory"} {
				if c.Resources.Requests[r] == "" {
					t.Errorf("no %s request", r)
				}
			}
			if c.Resources.Limits["memory"] == "" {
				t.Error("no memory limit")
			}
		}},
		{"the Service selects the bridge's pods and exposes 8080 as http", func(t *testing.T) {
			d, c := bridgePod(t, out)
			var s service
			out.decode(t, "Service", "bucketops-bridge", &s)
			if len(s.Spec.Selector) == 0 {
				t.Fatal("the Service selects nothing")
			}
			for k, v := range s.Spec.Selector {
				if d.Spec.Template.Metadata.Labels[k] != v {
					t.Errorf("selector %s=%s doesn't match the pod labels %v", k, v, d.Spec.Template.Metadata.Labels)
				}
			}
			if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 8080 || s.Spec.Ports[0].TargetPort != "http" || s.Spec.Ports[0].Name != "http" {
				t.Errorf("ports = %+v, want http 8080 to the container's http", s.Spec.Ports)
			}
			if !slices.ContainsFunc(c.Ports, func(p containerPort) bool { return p.Name == "http" }) {
				t.Error("the Service's targetPort http names no container port")
			}
		}},
		{"the bridge runs as the ServiceAccount that carries the Workload Identity annotation", func(t *testing.T) {
			d, _ := bridgePod(t, out)
			var sa struct{ Metadata meta }
			out.decode(t, "ServiceAccount", "bucketops-bridge", &sa)
			if d.Spec.Template.Spec.ServiceAccountName != sa.Metadata.Name {
				t.Errorf("serviceAccountName = %q, want %q", d.Spec.Template.Spec.ServiceAccountName, sa.Metadata.Name)
			}
			if !strings.HasSuffix(sa.Metadata.Annotations["iam.gke.io/gcp-service-account"], ".iam.gserviceaccount.com") {
				t.Errorf("iam.gke.io/gcp-service-account = %q, want a Google service account", sa.Metadata.Annotations["iam.gke.io/gcp-service-account"])
			}
		}},
		{"the NetworkPolicy admits only pods of Argo CD's namespace, on the bridge's http port", func(t *testing.T) {
			d, _ := bridgePod(t, out)
			var np networkPolicy
			out.decode(t, "NetworkPolicy", "bucketops-bridge", &np)
			for k, v := range np.Spec.PodSelector.MatchLabels {
				if d.Spec.Template.Metadata.Labels[k] != v {
					t.Errorf("the policy selects %s=%s, which the bridge's pods don't carry", k, v)
				}
			}
			if len(np.Spec.PodSelector.MatchLabels) == 0 {
				t.Error("the policy applies to every pod in the namespace")
			}
			if !slices.Equal(np.Spec.PolicyTypes, []string{"Ingress"}) || len(np.Spec.Ingress) != 1 {
				t.Fatalf("policy = %+v, want one ingress rule", np.Spec)
			}
			if ports := np.Spec.Ingress[0].Ports; len(ports) != 1 || ports[0].Port != "http" {
				t.Errorf("ports = %+v, want only http", ports)
			}
			for _, peer := range np.Spec.Ingress[0].From {
				if _, ok := peer["namespaceSelector"]; ok {
					t.Errorf("peer %v admits other namespaces", peer)
				}
				if _, ok := peer["ipBlock"]; ok {
					t.Errorf("peer %v admits addresses outside the cluster", peer)
				}
			}
		}},
		{"the plugin ConfigMap holds a ConfigManagementPlugin named bucketops that runs bucketops plugin generate", func(t *testing.T) {
			var cm configMap
			out.decode(t, "ConfigMap", "bucketops-cmp-plugin", &cm)
			if len(cm.Data) != 1 {
				t.Errorf("keys = %v, want only plugin.yaml", slices.Collect(maps.Keys(cm.Data)))
			}
			var p pluginConfig
			fromYAML(t, "plugin.yaml", []byte(cm.Data["plugin.yaml"]), &p)
			if p.APIVersion != "argoproj.io/v1alpha1" || p.Kind != "ConfigManagementPlugin" || p.Metadata.Name != "bucketops" {
				t.Errorf("plugin.yaml is %s %s %q, want argoproj.io/v1alpha1 ConfigManagementPlugin bucketops", p.APIVersion, p.Kind, p.Metadata.Name)
			}
			if p.Spec.Version != "" {
				t.Errorf("version %q would rename the plugin bucketops-%s", p.Spec.Version, p.Spec.Version)
			}
			if !slices.Equal(p.Spec.Generate.Command, []string{"bucketops", "plugin", "generate"}) || len(p.Spec.Generate.Args) != 0 {
				t.Errorf("generate = %q %q, want [bucketops plugin generate]", p.Spec.Generate.Command, p.Spec.Generate.Args)
			}
			if p.Spec.Init != nil {
				t.Errorf("init = %v, want none", p.Spec.Init)
			}
			if p.Spec.Discover != nil {
				t.Errorf("discover = %v, want none: the plugin is used by name only", p.Spec.Discover)
			}
			static := p.Spec.Parameters.Static
			if len(static) != 1 || static[0].Name != "app" || static[0].Required || static[0].Title == "" || !strings.Contains(static[0].Tooltip, "prod/payments") {
				t.Errorf("static parameters = %+v, want one optional app (the git view names the app) with a title and a tooltip", static)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.check)
	}
}

// argoCDInstall is how the example overlay names Argo CD's release manifest.
const argoCDInstall = "https://raw.githubusercontent.com/argoproj/argo-cd/v*/manifests/install.yaml"

// buildWithArgoCDStub builds examples/with-argocd as kubectl apply -k would,
// with Argo CD's remote install swapped for the stub in testdata, so that the
// test runs offline on a copy of this directory.
func buildWithArgoCDStub(t *testing.T) output {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(".")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "examples", "with-argocd", "kustomization.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var k map[string]any
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	resources, _ := k["resources"].([]any)
	swapped := 0
	for i, r := range resources {
		if ok, _ := path.Match(argoCDInstall, r.(string)); ok {
			resources[i] = "../../testdata/argocd-install"
			swapped++
		}
	}
	if swapped != 1 {
		t.Fatalf("examples/with-argocd has %d resources matching %s, want Argo CD's install once: %v", swapped, argoCDInstall, resources)
	}
	if b, err = yaml.Marshal(k); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return build(t, filepath.Dir(file))
}

func TestWithArgoCD(t *testing.T) {
	out := buildWithArgoCDStub(t)
	var repo deployment
	out.decode(t, "Deployment", "argocd-repo-server", &repo)
	pod := repo.Spec.Template.Spec
	sidecar := pod.container("bucketops")
	if sidecar == nil {
		t.Fatalf("argocd-repo-server has no bucketops sidecar; containers: %+v", pod.Containers)
	}

	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"the sidecar runs argocd-cmp-server as Argo CD's user 999", func(t *testing.T) {
			if !slices.Equal(sidecar.Command, []string{"/var/run/argocd/argocd-cmp-server"}) {
				t.Errorf("command = %q, want [/var/run/argocd/argocd-cmp-server]", sidecar.Command)
			}
			sc := sidecar.SecurityContext
			if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 999 {
				t.Errorf("securityContext = %+v, want runAsNonRoot and runAsUser 999", sc)
			}
			if sidecar.Image == "" {
				t.Error("the sidecar has no image")
			}
		}},
		{"the sidecar mounts argocd-cmp-server, the plugin sockets and plugin.yaml where Argo CD expects them", func(t *testing.T) {
			for mountPath, volumeName := range map[string]string{
				"/var/run/argocd":                 "var-files",
				"/home/argocd/cmp-server/plugins": "plugins",
			} {
				if m := sidecar.mountAt(mountPath); m == nil || m.Name != volumeName {
					t.Errorf("%s: mount %+v, want volume %s", mountPath, m, volumeName)
				}
			}
			m := sidecar.mountAt("/home/argocd/cmp-server/config/plugin.yaml")
			if m == nil || m.SubPath != "plugin.yaml" {
				t.Fatalf("plugin.yaml mount = %+v, want subPath plugin.yaml", m)
			}
			v := pod.volume(m.Name)
			if v == nil || v.ConfigMap == nil {
				t.Fatalf("volume %s isn't a ConfigMap: %+v", m.Name, v)
			}
			var cm configMap
			out.decode(t, "ConfigMap", v.ConfigMap.Name, &cm)
			var p pluginConfig
			fromYAML(t, "plugin.yaml", []byte(cm.Data["plugin.yaml"]), &p)
			if p.Metadata.Name != "bucketops" {
				t.Errorf("the mounted plugin.yaml names plugin %q, want bucketops", p.Metadata.Name)
			}
		}},
		{"the sidecar has its own emptyDir at /tmp, not the repo-server's", func(t *testing.T) {
			m := sidecar.mountAt("/tmp")
			if m == nil {
				t.Fatal("nothing mounted at /tmp: argocd-cmp-server can't extract sources on a read-only root")
			}
			if v := pod.volume(m.Name); v == nil || v.EmptyDir == nil {
				t.Errorf("/tmp is volume %+v, want an emptyDir", v)
			}
			for _, c := range pod.Containers {
				if c.Name == sidecar.Name {
					continue
				}
				for _, other := range c.VolumeMounts {
					if other.Name == m.Name {
						t.Errorf("container %s shares the sidecar's /tmp volume %s", c.Name, m.Name)
					}
				}
			}
		}},
		{"the sidecar's env points the plugin at the bridge's Service", func(t *testing.T) {
			e := sidecar.env("BUCKETOPS_BRIDGE")
			if e == nil {
				t.Fatal("no BUCKETOPS_BRIDGE")
			}
			u, err := url.Parse(e.Value)
			if err != nil || u.Scheme != "http" {
				t.Fatalf("BUCKETOPS_BRIDGE = %q, want an http URL", e.Value)
			}
			host, port, err := net.SplitHostPort(u.Host)
			if err != nil {
				t.Fatalf("BUCKETOPS_BRIDGE = %q: %v", e.Value, err)
			}
			var s service
			out.decode(t, "Service", "bucketops-bridge", &s)
			if want := s.Metadata.Name + "." + s.Metadata.Namespace + ".svc"; host != want {
				t.Errorf("BUCKETOPS_BRIDGE host = %q, want the Service %s", host, want)
			}
			if len(s.Spec.Ports) == 0 || port != strconv.Itoa(s.Spec.Ports[0].Port) {
				t.Errorf("BUCKETOPS_BRIDGE port = %s, want the Service's %+v", port, s.Spec.Ports)
			}
		}},
		{"the sidecar reads the plugin token, and only that one, from the token Secret", func(t *testing.T) {
			e := sidecar.env("BUCKETOPS_TOKEN_FILE")
			if e == nil {
				t.Fatal("no BUCKETOPS_TOKEN_FILE")
			}
			secret, key, ok := pod.secretFile(*sidecar, e.Value)
			if !ok || secret != "bucketops-bridge-tokens" || key != "plugin" {
				t.Errorf("%s is Secret %q key %q (found %v), want bucketops-bridge-tokens key plugin", e.Value, secret, key, ok)
			}
			for _, m := range sidecar.VolumeMounts {
				if v := pod.volume(m.Name); v != nil && v.Secret != nil {
					if !m.ReadOnly {
						t.Errorf("Secret volume %s is mounted writable", m.Name)
					}
					if len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != "plugin" {
						t.Errorf("Secret volume %s exposes %+v, want only the key plugin", v.Name, v.Secret.Items)
					}
				}
			}
		}},
		{"every volume the sidecar mounts is in the pod, next to Argo CD's own", func(t *testing.T) {
			for _, m := range sidecar.VolumeMounts {
				if pod.volume(m.Name) == nil {
					t.Errorf("the sidecar mounts %s, which the pod doesn't have", m.Name)
				}
			}
			for _, name := range []string{"tmp", "var-files", "plugins"} {
				if pod.volume(name) == nil {
					t.Errorf("the patch dropped Argo CD's volume %s", name)
				}
			}
			if pod.container("argocd-repo-server") == nil || len(pod.InitContainers) != 1 || pod.InitContainers[0].Name != "copyutil" {
				t.Errorf("the patch replaced Argo CD's containers instead of adding to them: %d containers, init %+v", len(pod.Containers), pod.InitContainers)
			}
		}},
		{"the repo-server leaves .git out of what it sends the plugin", func(t *testing.T) {
			var cm configMap
			out.decode(t, "ConfigMap", "argocd-cmd-params-cm", &cm)
			if got := cm.Data["reposerver.plugin.tar.exclusions"]; got != ".git" {
				t.Errorf("reposerver.plugin.tar.exclusions = %q, want .git", got)
			}
		}},
		{"kubectl logs and exec still default to the repo-server container", func(t *testing.T) {
			if got := repo.Spec.Template.Metadata.Annotations["kubectl.kubernetes.io/default-container"]; got != "argocd-repo-server" {
				t.Errorf("default container = %q, want argocd-repo-server", got)
			}
		}},
		{"the overlay installs the bridge with its bucket and Google service account set", func(t *testing.T) {
			if got := bucketOf(t, out); got != "gs://example-manifests" {
				t.Errorf("bucket = %q, want the overlay's gs://example-manifests", got)
			}
			var sa struct{ Metadata meta }
			out.decode(t, "ServiceAccount", "bucketops-bridge", &sa)
			if got := sa.Metadata.Annotations["iam.gke.io/gcp-service-account"]; got != "bucketops-bridge@example-project.iam.gserviceaccount.com" {
				t.Errorf("iam.gke.io/gcp-service-account = %q, want the overlay's", got)
			}
		}},
		{"everything lands in namespace argocd", func(t *testing.T) {
			for _, r := range out {
				if r.GetNamespace() != "argocd" {
					t.Errorf("%s/%s is in namespace %q", r.GetKind(), r.GetName(), r.GetNamespace())
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.check)
	}
}

func TestExampleApplication(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("examples", "application.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var app application
	fromYAML(t, "examples/application.yaml", b, &app)
	var cm configMap
	build(t, "base").decode(t, "ConfigMap", "bucketops-cmp-plugin", &cm)
	var plugin pluginConfig
	fromYAML(t, "plugin.yaml", []byte(cm.Data["plugin.yaml"]), &plugin)
	src := app.Spec.Source

	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"the Application names the plugin bucketops", func(t *testing.T) {
			if src.Plugin == nil || src.Plugin.Name != plugin.Metadata.Name {
				t.Errorf("plugin = %+v, want name %s", src.Plugin, plugin.Metadata.Name)
			}
		}},
		{"the Application's repository is the bridge's git view of its app, at main", func(t *testing.T) {
			var svc struct {
				Metadata struct{ Name, Namespace string }
				Spec     struct{ Ports []struct{ Port int } }
			}
			build(t, "base").decode(t, "Service", "bucketops-bridge", &svc)
			want := fmt.Sprintf("http://%s.%s.svc:%d/git/prod/payments.git", svc.Metadata.Name, svc.Metadata.Namespace, svc.Spec.Ports[0].Port)
			if src.RepoURL != want || src.TargetRevision != "main" || src.Path != "." {
				t.Errorf("repoURL %q, targetRevision %q, path %q; want %s, main, .", src.RepoURL, src.TargetRevision, src.Path, want)
			}
			if app, ok := deploy.GitViewApp(src.RepoURL); !ok || app != "prod/payments" {
				t.Errorf("the bridge reads app %q (%v) from the repoURL, want prod/payments", app, ok)
			}
			if src.Plugin != nil && len(src.Plugin.Parameters) != 0 {
				t.Errorf("parameters %+v: the git view names the app", src.Plugin.Parameters)
			}
		}},
		{"the Application deploys in-cluster and syncs automatically with prune and self-heal", func(t *testing.T) {
			if app.Spec.Destination.Server != "https://kubernetes.default.svc" {
				t.Errorf("destination = %q, want the cluster Argo CD runs in", app.Spec.Destination.Server)
			}
			a := app.Spec.SyncPolicy.Automated
			if a == nil || !a.Prune || !a.SelfHeal {
				t.Errorf("automated = %+v, want prune and selfHeal", a)
			}
			if a != nil && a.AllowEmpty {
				t.Error("allowEmpty turns off Argo CD's guard against an automated sync deleting everything")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.check)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestExampleApplicationSet reads the example as Argo CD's own type does,
// strictly, and checks that it uses the base's generator and the plugin,
// and keeps a retired app's resources.
func TestExampleApplicationSet(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("examples", "applicationset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var set v1alpha1.ApplicationSet
	if err := sigsyaml.UnmarshalStrict(b, &set); err != nil {
		t.Fatalf("examples/applicationset.yaml is not an ApplicationSet: %v", err)
	}
	if len(set.Spec.Generators) != 1 || set.Spec.Generators[0].Plugin == nil {
		t.Fatalf("generators %+v, want one plugin generator", set.Spec.Generators)
	}
	gen := set.Spec.Generators[0].Plugin
	var cm struct{ Data map[string]string }
	build(t, "base").decode(t, "ConfigMap", gen.ConfigMapRef.Name, &cm)
	if cm.Data["baseUrl"] == "" {
		t.Errorf("the generator's ConfigMap %s has no baseUrl", gen.ConfigMapRef.Name)
	}
	if _, ok := gen.Input.Parameters["prefix"]; !ok {
		t.Error("the generator has no prefix parameter, which the bridge requires")
	}
	if set.Spec.SyncPolicy == nil || !set.Spec.SyncPolicy.PreserveResourcesOnDeletion {
		t.Error("retiring an app would delete its resources: set syncPolicy.preserveResourcesOnDeletion")
	}
	if !set.Spec.GoTemplate {
		t.Error("the template is written for goTemplate")
	}
	src := set.Spec.Template.Spec.Source
	if src == nil || src.Plugin == nil || src.Plugin.Name != "bucketops" || src.RepoURL != "{{ .repoURL }}" || set.Spec.Template.Name != "{{ .name }}" {
		t.Errorf("template %+v: want the generator's name and repoURL and plugin bucketops", set.Spec.Template)
	}
}
