package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/bucketops/bucketops/render"
)

// clusterScoped are the kinds of Kubernetes' own cluster-scoped resources.
// A custom resource's scope can't be told from a manifest: an Argo CD
// project's clusterResourceWhitelist (empty by default) is what keeps
// cluster-scoped custom resources out; docs/tenancy.md says so.
var clusterScoped = map[string]bool{
	"APIService": true, "CertificateSigningRequest": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"ComponentStatus": true, "CSIDriver": true, "CSINode": true, "CustomResourceDefinition": true,
	"FlowSchema": true, "IngressClass": true, "MutatingAdmissionPolicy": true, "MutatingAdmissionPolicyBinding": true,
	"MutatingWebhookConfiguration": true, "Namespace": true, "Node": true, "PersistentVolume": true,
	"PodSecurityPolicy": true, "PriorityClass": true, "PriorityLevelConfiguration": true, "RuntimeClass": true,
	"StorageClass": true, "StorageVersionMigration": true, "ValidatingAdmissionPolicy": true,
	"ValidatingAdmissionPolicyBinding": true, "ValidatingWebhookConfiguration": true, "VolumeAttachment": true,
	"VolumeAttributesClass": true, "ClusterTrustBundle": true, "IPAddress": true, "ServiceCIDR": true,
	"DeviceClass": true, "ResourceSlice": true,
}

// IsClusterScoped reports whether kind is one of Kubernetes' own
// cluster-scoped kinds.
func IsClusterScoped(kind string) bool { return clusterScoped[kind] }

// encryptedMetadata are the metadata keys an encrypted document may carry.
// The SOPS MAC covers values, not key names: renaming namespace to
// generateName (or uid, or any string field) keeps the MAC valid and moves
// the Secret into whatever namespace deploys it. Only the keys a manifest
// needs are allowed, so such a rename can't pass.
var encryptedMetadata = []string{"name", "namespace", "labels", "annotations"}

// CheckObjects checks a release's objects against the rule's content rules:
// namespaces, cluster-scoped kinds, plaintext Secrets, and for encrypted
// documents a readable identity, plain metadata and keys the rule allows.
// destination is the namespace objects without one land in (the Argo CD
// Application's destination namespace); "" when unknown, as at push time,
// when only explicit namespaces are checked.
func (r *Rule) CheckObjects(app string, objs []render.Object, destination string) error {
	for _, o := range objs {
		if err := r.checkObject(app, o, destination); err != nil {
			return err
		}
	}
	return nil
}

// CheckDestination checks only where objects without a namespace land:
// the part of CheckObjects that depends on the Application asking.
func (r *Rule) CheckDestination(app string, objs []render.Object, destination string) error {
	if destination == "" {
		return nil
	}
	for _, o := range objs {
		if o.Namespace == "" && !IsClusterScoped(o.Kind) && !r.allowsNamespace(destination) {
			return r.deny(app, ReasonNamespace, fmt.Sprintf("%s (%s) has no namespace and would land in the Application's destination namespace %q; the rule allows %s: give it one of those namespaces, or deploy it with an Application whose destination is one", o, o.Source, destination, list(r.Namespaces)))
		}
	}
	return nil
}

func (r *Rule) checkObject(app string, o render.Object, destination string) error {
	where := fmt.Sprintf("%s (%s)", o, o.Source)
	if o.Encrypted {
		if err := r.checkEncrypted(app, o, where); err != nil {
			return err
		}
	}
	group, _, hasGroup := strings.Cut(o.APIVersion, "/")
	if !hasGroup {
		group = ""
	}
	switch {
	case group == "" && o.Kind == "Secret" && !o.Encrypted && !r.AllowPlaintextSecrets:
		return r.deny(app, ReasonPlaintextSecret, where+" is a Secret in clear text; encrypt it with sops (--encrypted-regex '^(data|stringData)$'), or set allowPlaintextSecrets on the rule")
	case IsClusterScoped(o.Kind):
		if !r.AllowClusterScoped {
			return r.deny(app, ReasonClusterScoped, where+" is cluster-scoped; the rule doesn't set allowClusterScoped: take it out of the release (the platform team applies cluster-scoped objects), or set allowClusterScoped on the rule")
		}
		return nil
	case o.Namespace != "":
		if !r.allowsNamespace(o.Namespace) {
			return r.deny(app, ReasonNamespace, fmt.Sprintf("%s is in namespace %q; the rule allows %s: move it to one of those, or add the namespace to the rule", where, o.Namespace, list(r.Namespaces)))
		}
	}
	return r.CheckDestination(app, []render.Object{o}, destination)
}

func (r *Rule) checkEncrypted(app string, o render.Object, where string) error {
	if o.APIVersion == "" {
		return r.deny(app, ReasonEncrypted, fmt.Sprintf("%s has its identity encrypted; under a policy, encrypt only the values (sops --encrypted-regex '^(data|stringData)$') so apiVersion, kind and metadata stay readable", where))
	}
	for _, k := range o.MetadataKeys() {
		if !slices.Contains(encryptedMetadata, k) {
			return r.deny(app, ReasonEncrypted, fmt.Sprintf("%s: an encrypted document's metadata may hold only %s, not %q (the SOPS MAC doesn't cover key names): encrypt the document again from its plain form, with sops --encrypted-regex '^(data|stringData)$'", where, strings.Join(encryptedMetadata, ", "), k))
		}
	}
	keys := o.MasterKeys()
	for _, k := range keys {
		if r.AllowsKey(k.Type, k.ID) {
			return nil
		}
	}
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = Key{Type: k.Type, ID: k.ID}.String()
	}
	return r.deny(app, ReasonKey, fmt.Sprintf("%s is encrypted for %s, none of which the rule's decryptionKeys allow (%s); encrypt it for a key of this prefix (sops updatekeys after naming one in .sops.yaml), or add the key to the rule", where, orNone(names), list(r.DecryptionKeys)))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "no key"
	}
	return strings.Join(s, ", ")
}
