package render_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/render"
)

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const cmA = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: pay\ndata:\n  k: v\n"
const deploy = "# the API\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\nspec:\n  template:\n    spec:\n      containers:\n        - name: api\n          args: |\n            --flag\n            --- not a separator, inside a block scalar\n"

func TestAssembleDirIsCanonical(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"z/deploy.yml":   "---\n" + deploy + "\n\n",
		"a.yaml":         "# leading comment only document\n---\n" + cmA + "...\n",
		"ns.json":        `{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "pay"}}`,
		"README.md":      "not a manifest",
		".git/x.yaml":    "this: is skipped",
		"crlf/cm.yaml":   "apiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: crlf\r\n--- \r\n",
		"multi/two.yaml": "--- apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: two}\n",
	})
	rel, err := render.AssembleDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := "# Source: a.yaml\n" + cmA +
		"---\n# Source: crlf/cm.yaml\napiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: crlf\n" +
		"---\n# Source: multi/two.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: one}\n" +
		"---\n# Source: multi/two.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: two}\n" +
		"---\n# Source: ns.json\n" + `{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "pay"}}` + "\n" +
		"---\n# Source: z/deploy.yml\n" + deploy
	if string(rel.Bytes) != want {
		t.Errorf("stream:\n%s\nwant:\n%s", rel.Bytes, want)
	}
	if rel.Resources() != 6 || rel.Digest != render.Digest([]byte(want)) || !strings.HasPrefix(rel.Digest, "sha256:") {
		t.Errorf("%d resources, digest %s", rel.Resources(), rel.Digest)
	}
	var names []string
	for _, o := range rel.Objects {
		names = append(names, o.String())
	}
	if got := strings.Join(names, ", "); got != "ConfigMap pay/a, ConfigMap crlf, ConfigMap one, ConfigMap two, Namespace pay, Deployment api" {
		t.Errorf("objects: %s", got)
	}
	again, err := render.AssembleDir(dir)
	if err != nil || !bytes.Equal(again.Bytes, rel.Bytes) {
		t.Errorf("a second assembly of the same directory differs: %v", err)
	}
}

func TestSOPSDocumentsAreKeptByteForByte(t *testing.T) {
	secret, err := os.ReadFile("testdata/secret.sops.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := render.AssembleStream("stdin", strings.NewReader(cmA+"---\n"+string(secret)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(rel.Bytes, secret) {
		t.Errorf("the encrypted document was changed:\n%s", rel.Bytes)
	}
	s := rel.Objects[1]
	if !s.Encrypted || s.String() != "Secret payments/payments-db" || !bytes.Equal(s.Body, secret) {
		t.Errorf("encrypted object: %+v", s)
	}
	// With its identity encrypted too, a SOPS document is still accepted.
	opaque := strings.Replace(string(secret), "kind: Secret", "kind: ENC[AES256_GCM,data:abc=,type:str]", 1)
	rel, err = render.AssembleStream("stdin", strings.NewReader(opaque))
	if err != nil || !rel.Objects[0].Encrypted || rel.Objects[0].APIVersion != "" {
		t.Errorf("a fully encrypted document: %+v %v", rel, err)
	}
}

func TestParseRoundTrips(t *testing.T) {
	secret, _ := os.ReadFile("testdata/secret.sops.yaml")
	dir := writeTree(t, map[string]string{"a.yaml": cmA, "s/secret.yaml": string(secret), "d.yaml": deploy + "---\n# Source: chart/templates/x.yaml\n" + strings.ReplaceAll(cmA, "name: a", "name: x")})
	rel, err := render.AssembleDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := render.Parse(rel.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if parsed.Digest != rel.Digest || !reflect.DeepEqual(parsed.Objects, rel.Objects) {
		t.Errorf("parse of an assembled stream:\n%+v\nwant:\n%+v", parsed.Objects, rel.Objects)
	}
	if parsed.Objects[2].Source != "d.yaml" || !bytes.HasPrefix(parsed.Objects[2].Body, []byte("# Source: chart/templates/x.yaml\n")) {
		t.Errorf("a document with its own Source comment: %+v", parsed.Objects[2])
	}
}

func TestRejections(t *testing.T) {
	big := strings.Repeat("# padding padding padding padding padding padding padding padding\n", (render.MaxReleaseBytes/64)+10)
	cases := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"unparsable YAML", map[string]string{"bad.yaml": cmA + "---\nkind: [a, b\n"}, []string{"bad.yaml: document 2 (line 9", "invalid YAML"}},
		{"a scalar document", map[string]string{"s.yaml": "just text\n"}, []string{"s.yaml: document 1", "not a mapping"}},
		{"a missing kind", map[string]string{"k.yaml": "apiVersion: v1\nmetadata:\n  name: a\n"}, []string{"k.yaml: document 1", "kind: missing"}},
		{"a missing name", map[string]string{"n.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels: {}\n"}, []string{"metadata.name: missing"}},
		{"a name that isn't a string", map[string]string{"n.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [x]\n"}, []string{"metadata.name: must be a string"}},
		{"a numeric kind", map[string]string{"n.yaml": "apiVersion: v1\nkind: 7\nmetadata:\n  name: x\n"}, []string{"kind: must be a string"}},
		{"metadata that isn't a mapping", map[string]string{"m.yaml": "apiVersion: v1\nkind: A\nmetadata: x\n"}, []string{"metadata: must be a mapping"}},
		{"a duplicate in one file", map[string]string{"d.yaml": cmA + "---\n" + cmA}, []string{"d.yaml: document 2", "ConfigMap pay/a is already defined in d.yaml document 1"}},
		{"a duplicate across files", map[string]string{"1.yaml": cmA, "2.yaml": strings.Replace(cmA, "k: v", "k: w", 1)}, []string{"2.yaml: document 1", "1.yaml document 1"}},
		{"a SOPS block without mac", map[string]string{"s.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nsops:\n  version: 3.9.4\n"}, []string{"sops: has no mac"}},
		{"an empty directory", map[string]string{}, []string{"no *.yaml, *.yml or *.json files"}},
		{"only comments", map[string]string{"c.yaml": "# nothing\n---\n\n"}, []string{"no Kubernetes objects"}},
		{"a release over 10 MiB", map[string]string{"big.yaml": cmA + big}, []string{"larger than 10 MiB"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := render.AssembleDir(writeTree(t, c.files))
			checkInvalid(t, err, c.want)
		})
	}
	t.Run("a missing path", func(t *testing.T) {
		_, err := render.AssembleDir(filepath.Join(t.TempDir(), "nope"))
		checkInvalid(t, err, []string{"nope", "no such file"})
	})
	t.Run("an empty stream", func(t *testing.T) {
		_, err := render.AssembleStream("stdin", strings.NewReader("\n---\n"))
		checkInvalid(t, err, []string{"stdin", "no Kubernetes objects"})
	})
	t.Run("a stored stream with an invalid document", func(t *testing.T) {
		_, err := render.Parse([]byte("# Source: a.yaml\n" + cmA + "---\n# Source: b.yaml\napiVersion: v1\n"))
		checkInvalid(t, err, []string{"b.yaml: document 1", "kind: missing"})
	})
}

func checkInvalid(t *testing.T, err error, want []string) {
	t.Helper()
	var ie *render.InputError
	if !errors.Is(err, render.ErrInvalid) || !errors.As(err, &ie) {
		t.Fatalf("error %v, want an *InputError wrapping ErrInvalid", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

func TestAssembleFileRoot(t *testing.T) {
	dir := writeTree(t, map[string]string{"only.yaml": cmA})
	rel, err := render.AssembleDir(filepath.Join(dir, "only.yaml"))
	if err != nil || !strings.HasPrefix(string(rel.Bytes), "# Source: only.yaml\n") {
		t.Errorf("a single file: %v %q", err, rel)
	}
}
