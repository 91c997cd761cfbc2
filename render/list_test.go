package render_test

import (
	"strings"
	"testing"

	"github.com/bucketops/bucketops/render"
)

// wrapped are the objects of the review's reproduction (issue 24, item 2):
// what a team allowed only its own namespace smuggles in as items of one
// object that its rule does allow.
const wrapped = `  - apiVersion: rbac.authorization.k8s.io/v1
    kind: ClusterRoleBinding
    metadata:
      name: team-b-is-admin
    roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
    subjects: [{kind: Group, name: system:authenticated, apiGroup: rbac.authorization.k8s.io}]
  - apiVersion: v1
    kind: Secret
    metadata:
      name: planted
      namespace: kube-system
    stringData:
      token: not-encrypted
`

// A document that is a list of objects is refused wherever a release is
// read: Argo CD's repo-server (Unstructured.IsList) and kubectl apply each
// item as an object of its own, so no check made on the document, the
// tenancy policy's included, would have seen what reaches the cluster.
func TestListsOfObjectsAreRefused(t *testing.T) {
	ids := newAgeKeys(t, 1)
	encryptedItems, _ := sopsEncrypt(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: wrapper\n  namespace: team-b\nitems:\n"+wrapped, "^(items|data|stringData)$", recipientsOf(ids...)...)
	for _, c := range []struct {
		name, doc, field string
		says             []string
	}{
		{
			name:  "a ConfigMap in the team's namespace whose items hold a ClusterRoleBinding to cluster-admin and a Secret in kube-system",
			doc:   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: wrapper\n  namespace: team-b\ndata:\n  a: b\nitems:\n" + wrapped,
			field: "items", says: []string{"a top-level items list (2 items) makes the document a list of objects"},
		},
		{
			name:  "a named List holding the same",
			doc:   "apiVersion: v1\nkind: List\nmetadata:\n  name: wrapper\n  namespace: team-b\nitems:\n" + wrapped,
			field: "items",
		},
		{
			name:  "a list kind without items",
			doc:   "apiVersion: v1\nkind: SecretList\nmetadata:\n  name: wrapper\n",
			field: "kind", says: []string{`"SecretList" is a list of objects, not one object`},
		},
		{
			name:  "a List without a name, which is a list before it is a nameless object",
			doc:   "apiVersion: v1\nkind: List\nmetadata: {}\n",
			field: "kind",
		},
		{
			name:  "an empty items list, which would make the object vanish",
			doc:   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: wrapper\nitems: []\n",
			field: "items", says: []string{"(0 items)"},
		},
		{
			name:  "items merged in with <<",
			doc:   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: wrapper\n<<:\n  items:\n" + wrapped,
			field: "items",
		},
		{
			name:  "items that are an alias to a list",
			doc:   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: wrapper\ndata:\n  a: &l [x]\nitems: *l\n",
			field: "items",
		},
		{
			name:  "a SOPS document whose items list is encrypted",
			doc:   string(encryptedItems),
			field: "items",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			says := append([]string{"split it into separate documents"}, c.says...)
			// Second in its file, so the error must say which document.
			stream := settings + "---\n" + c.doc
			t.Run("at push", func(t *testing.T) {
				_, err := render.AssembleDir(writeTree(t, "deploy/wrapper.yaml", stream))
				checkInputError(t, err, reject{file: "deploy/wrapper.yaml", document: 2, field: c.field, says: says})
			})
			t.Run("from stdin", func(t *testing.T) {
				_, err := render.AssembleStream("stdin", strings.NewReader(stream))
				checkInputError(t, err, reject{file: "stdin", document: 2, field: c.field, says: says})
			})
			t.Run("in a release written without the CLI", func(t *testing.T) {
				_, err := render.Parse(releaseStream(relDoc{Source: "a.yaml", Body: api}, relDoc{Source: "w.yaml", Body: settings}, relDoc{Source: "w.yaml", Body: c.doc}))
				checkInputError(t, err, reject{file: "w.yaml", document: 2, field: c.field, says: says})
			})
		})
	}

	t.Run("items below the top level and items that aren't a list are kept", func(t *testing.T) {
		for _, doc := range []string{
			"apiVersion: example.com/v1\nkind: Menu\nmetadata:\n  name: m\nspec:\n  items: [a, b]\n",
			"apiVersion: example.com/v1\nkind: Cart\nmetadata:\n  name: c\nitems: {count: 2}\n",
			"apiVersion: example.com/v1\nkind: Cart\nmetadata:\n  name: c\nitems: null\n",
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  items: '[a, b]'\n",
			"apiVersion: example.com/v1\nkind: Listing\nmetadata:\n  name: l\n",
		} {
			if _, err := render.AssembleStream("stdin", strings.NewReader(doc)); err != nil {
				t.Errorf("%v:\n%s", err, doc)
			}
		}
	})
}
