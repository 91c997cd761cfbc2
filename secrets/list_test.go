package secrets_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/secrets"
)

// wrapper is a ConfigMap in the team's own namespace whose items hold a
// ClusterRoleBinding to cluster-admin and a plaintext Secret in
// kube-system: what Argo CD's repo-server would apply as two objects of
// their own (issue 24, item 2).
const wrapper = `apiVersion: v1
kind: ConfigMap
metadata:
  name: wrapper
  namespace: team-b
items:
  - apiVersion: rbac.authorization.k8s.io/v1
    kind: ClusterRoleBinding
    metadata: {name: team-b-is-admin}
    roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
    subjects: [{kind: Group, name: system:authenticated, apiGroup: rbac.authorization.k8s.io}]
  - apiVersion: v1
    kind: Secret
    metadata: {name: planted, namespace: kube-system}
    stringData: {token: not-encrypted}
`

// A release written to the bucket behind the CLI's back is parsed again by
// the bridge, so a document that is a list of objects is refused there too,
// encrypted or not, and nothing of the release is rendered.
func TestRenderRefusesListsOfObjects(t *testing.T) {
	ids := newAgeKeys(t, 1)
	me := recipientsOf(ids...)[0]
	d := newDecrypter(t, ids...)
	// sops never encrypts keys or the tree's shape: an encrypted items list
	// is still a list, and refused before anything is decrypted.
	encryptedItems, _ := sopsEncrypt(t, wrapper, "^(items|data|stringData)$", me)
	// Whose kind is encrypted: only the decrypted document says it is a
	// list, and it is checked as a document that was never encrypted.
	opaqueList, _ := sopsEncrypt(t, "apiVersion: v1\nkind: SecretList\nmetadata:\n  name: wrapper\n  namespace: team-b\n", "", me)
	for _, c := range []struct {
		name, doc string
		// decrypted: refused once decrypted, as a DecryptError, rather
		// than as the stored release's InputError.
		decrypted bool
		says      string
	}{
		{name: "a plain ConfigMap whose items hold a ClusterRoleBinding and a Secret", doc: wrapper, says: "items: a top-level items list (2 items)"},
		{name: "a named List", doc: strings.Replace(wrapper, "kind: ConfigMap", "kind: List", 1), says: "items: a top-level items list"},
		{name: "a SOPS document whose items are encrypted", doc: string(encryptedItems), says: "items: a top-level items list (2 items)"},
		{name: "a SOPS document whose kind decrypts to a list kind", doc: string(opaqueList), decrypted: true, says: `kind: "SecretList" is a list of objects`},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := releaseStream(relDoc{Source: "a.yaml", Body: api}, relDoc{Source: "b.yaml", Body: settings}, relDoc{Source: "b.yaml", Body: c.doc})
			out, err := renderBytes(d, data, false)
			if out != nil {
				t.Errorf("a refused release rendered %q", out)
			}
			var de *secrets.DecryptError
			var ie *render.InputError
			switch {
			case c.decrypted && errors.As(err, &de):
				if de.Reason != secrets.ReasonInvalidDocument || de.Source != "b.yaml" || de.Document != 2 {
					t.Errorf("%+v: want %s for b.yaml document 2", de, secrets.ReasonInvalidDocument)
				}
			case !c.decrypted && errors.As(err, &ie):
				if ie.File != "b.yaml" || ie.Document != 2 || !errors.Is(err, render.ErrInvalid) {
					t.Errorf("%+v: want an ErrInvalid for b.yaml document 2", ie)
				}
			default:
				t.Fatalf("%v: want the document refused (once decrypted: %v)", err, c.decrypted)
			}
			for _, want := range []string{"b.yaml: document 2", c.says, "split it into separate documents"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}
