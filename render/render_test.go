package render_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/render"
)

// writeTree writes files (slash-separated relative path → content) under a
// new temporary directory, in the order given, and returns the directory.
func writeTree(t *testing.T, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	for i := 0; i+1 < len(files); i += 2 {
		p := filepath.Join(dir, filepath.FromSlash(files[i]))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(files[i+1]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func configMap(namespace, name string) string {
	s := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
	if namespace != "" {
		s += "  namespace: " + namespace + "\n"
	}
	return s + "data:\n  key: value\n"
}

func readSecret(t *testing.T) []byte {
	t.Helper()
	secret, err := os.ReadFile("testdata/secret.sops.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

func TestAssembleDirIsDeterministic(t *testing.T) {
	t.Run("the same directory gives the same bytes and digest twice", func(t *testing.T) {
		dir := writeTree(t, "b.yaml", configMap("prod", "b"), "a/x.yml", configMap("prod", "x"), "c.json", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"prod"}}`)
		first, err := render.AssembleDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		second, err := render.AssembleDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first.Bytes, second.Bytes) || first.Digest != second.Digest {
			t.Errorf("two assemblies differ:\n%s\n%s", first.Bytes, second.Bytes)
		}
		if first.Digest != render.Digest(first.Bytes) {
			t.Errorf("Digest %s is not the digest of the stream", first.Digest)
		}
	})

	t.Run("files are ordered by relative path, not by creation", func(t *testing.T) {
		// "a-b/x.yaml" sorts before "a/x.yaml" ('-' < '/'), though a walk of
		// each directory in turn would visit a/ first.
		names := []string{"z.yaml", "a/x.yaml", "a-b/x.yaml", "a/b/c.yaml", "m.yml"}
		forward := writeTree(t)
		backward := writeTree(t)
		for i, name := range names {
			for _, root := range []string{forward, backward} {
				n := name
				if root == backward {
					n = names[len(names)-1-i]
				}
				p := filepath.Join(root, filepath.FromSlash(n))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(configMap("", strings.NewReplacer("/", "-", ".", "-").Replace(n))), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		a, err := render.AssembleDir(forward)
		if err != nil {
			t.Fatal(err)
		}
		b, err := render.AssembleDir(backward)
		if err != nil {
			t.Fatal(err)
		}
		if a.Digest != b.Digest {
			t.Errorf("creation order changed the release")
		}
		var sources []string
		for _, o := range a.Objects {
			sources = append(sources, o.Source)
		}
		if got, want := strings.Join(sources, " "), "a-b/x.yaml a/b/c.yaml a/x.yaml m.yml z.yaml"; got != want {
			t.Errorf("sources in order %q, want %q", got, want)
		}
	})

	t.Run("a small input gives exactly the expected stream", func(t *testing.T) {
		dir := writeTree(t,
			"apps/api.yaml", "# The API.\n---\n"+configMap("prod", "api")+"\n\n---\n# only a comment\n---\n"+
				"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n  namespace: prod\nspec:\n  replicas: 2   \n...\n",
			"apps/windows.yaml", "\ufeffapiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: win\r\n---\r\n",
			"00-namespace.json", "{\n\t\"apiVersion\": \"v1\",\n\t\"kind\": \"Namespace\",\n\t\"metadata\": {\"name\": \"prod\"}\n}",
			"more.yml", "--- # the separator's comment\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: api, namespace: prod}",
			"README.md", "not a manifest",
			".git/config.yaml", "not: read",
			".sops.yaml", "creation_rules: []\n",
		)
		rel, err := render.AssembleDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		want := "# Source: 00-namespace.json\n" +
			"{\n\t\"apiVersion\": \"v1\",\n\t\"kind\": \"Namespace\",\n\t\"metadata\": {\"name\": \"prod\"}\n}\n" +
			// The comment before the first separator is a document of its
			// own, with nothing in it: it is dropped.
			"---\n# Source: apps/api.yaml\n" +
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: api\n  namespace: prod\ndata:\n  key: value\n" +
			"---\n# Source: apps/api.yaml\n" +
			"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n  namespace: prod\nspec:\n  replicas: 2\n" +
			"---\n# Source: apps/windows.yaml\n" +
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: win\n" +
			"---\n# Source: more.yml\n" +
			"# the separator's comment\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: api, namespace: prod}\n"
		if string(rel.Bytes) != want {
			t.Errorf("stream:\n%s\nwant:\n%s", rel.Bytes, want)
		}
		var got []string
		for _, o := range rel.Objects {
			got = append(got, o.Key())
		}
		if want := "/Namespace//prod /ConfigMap/prod/api apps/Deployment/prod/api /ConfigMap//win /ServiceAccount/prod/api"; strings.Join(got, " ") != want {
			t.Errorf("keys %q, want %q", strings.Join(got, " "), want)
		}
		if rel.Resources() != 5 {
			t.Errorf("Resources() = %d, want 5", rel.Resources())
		}
	})
}

func TestAssembleStream(t *testing.T) {
	cases := []struct {
		name  string
		input string
		want  string
	}{
		{
			name:  "helm output keeps its own Source comments in the bodies",
			input: "---\n# Source: chart/templates/cm.yaml\n" + configMap("", "a") + "---\n# Source: chart/templates/empty.yaml\n",
			want:  "# Source: stdin\n# Source: chart/templates/cm.yaml\n" + configMap("", "a"),
		},
		{
			name:  "a document without a final line break gets one",
			input: "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: prod",
			want:  "# Source: stdin\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: prod\n",
		},
		{
			name:  "a document ending in a block scalar with a line break is kept",
			input: configMap("", "a") + "  script: |\n    echo hi\n\n\n",
			want:  "# Source: stdin\n" + configMap("", "a") + "  script: |\n    echo hi\n",
		},
		{
			name:  "old Mac line endings are line breaks too",
			input: "apiVersion: v1\rkind: Namespace\rmetadata:\r  name: prod\r---\rapiVersion: v1\rkind: Namespace\rmetadata: {name: dev}\r",
			want:  "# Source: stdin\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: prod\n---\n# Source: stdin\napiVersion: v1\nkind: Namespace\nmetadata: {name: dev}\n",
		},
		{
			name:  "the same name in two namespaces is two objects",
			input: configMap("a", "x") + "---\n" + configMap("b", "x") + "---\n" + configMap("", "x"),
			want:  "# Source: stdin\n" + configMap("a", "x") + "---\n# Source: stdin\n" + configMap("b", "x") + "---\n# Source: stdin\n" + configMap("", "x"),
		},
		{
			name:  "a field taken from a merge key identifies the object",
			input: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  <<: {name: merged}\n",
			want:  "# Source: stdin\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  <<: {name: merged}\n",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rel, err := render.AssembleStream("stdin", strings.NewReader(c.input))
			if err != nil {
				t.Fatal(err)
			}
			if string(rel.Bytes) != c.want {
				t.Errorf("stream:\n%q\nwant:\n%q", rel.Bytes, c.want)
			}
			back, err := render.Parse(rel.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back.Objects, rel.Objects) {
				t.Errorf("Parse gives other objects:\n%+v\nwant:\n%+v", back.Objects, rel.Objects)
			}
		})
	}
}

func TestSOPSDocumentsAreStoredByteForByte(t *testing.T) {
	secret := readSecret(t)

	t.Run("a Secret with encrypted data keeps its bytes and its identity", func(t *testing.T) {
		dir := writeTree(t, "cm.yaml", configMap("payments", "settings"), "secrets/db.yaml", string(secret))
		rel, err := render.AssembleDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(rel.Bytes, append([]byte("# Source: secrets/db.yaml\n"), secret...)) {
			t.Errorf("the encrypted document was changed:\n%s", rel.Bytes)
		}
		s := rel.Objects[1]
		if !s.Encrypted || !bytes.Equal(s.Body, secret) || s.Key() != "/Secret/payments/payments-db" || s.String() != "Secret payments/payments-db" {
			t.Errorf("encrypted object %+v, key %s", s, s.Key())
		}
		if rel.Objects[0].Encrypted {
			t.Errorf("a ConfigMap is taken for an encrypted document")
		}
	})

	t.Run("a document whose identity is encrypted too is keyed by its place", func(t *testing.T) {
		opaque := bytes.Replace(secret, []byte("    name: payments-db"), []byte("    name: ENC[AES256_GCM,data:cGF5bWVudHMtZGI=,iv:AAAA,tag:BBBB,type:str]"), 1)
		rel, err := render.AssembleStream("stdin", io.MultiReader(strings.NewReader(configMap("", "a")+"---\n"), bytes.NewReader(opaque)))
		if err != nil {
			t.Fatal(err)
		}
		o := rel.Objects[1]
		if !o.Encrypted || o.APIVersion != "" || o.Kind != "" || o.Name != "" || !bytes.Equal(o.Body, opaque) {
			t.Errorf("object %+v", o)
		}
		if o.Key() != "sops:stdin#2" || o.String() != "encrypted document 2 of stdin" {
			t.Errorf("key %q, string %q", o.Key(), o.String())
		}
	})

	t.Run("two documents with encrypted identities are not duplicates", func(t *testing.T) {
		opaque := bytes.Replace(secret, []byte("kind: Secret"), []byte("kind: ENC[AES256_GCM,data:U2VjcmV0,iv:AAAA,tag:BBBB,type:str]"), 1)
		rel, err := render.AssembleStream("stdin", bytes.NewReader(bytes.Join([][]byte{opaque, opaque}, []byte("---\n"))))
		if err != nil {
			t.Fatal(err)
		}
		if rel.Objects[0].Key() == rel.Objects[1].Key() {
			t.Errorf("both keyed %s", rel.Objects[0].Key())
		}
	})
}

func TestParseRoundTrips(t *testing.T) {
	secret := readSecret(t)
	dir := writeTree(t,
		"a.yaml", configMap("prod", "a")+"---\n# Source: chart/templates/b.yaml\n"+configMap("prod", "b"),
		"secrets/db.yaml", string(secret),
		"z/ns.json", `{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod"}}`,
		"crlf.yaml", "apiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: crlf\r\n",
	)
	rel, err := render.AssembleDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := render.Parse(rel.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if parsed.Digest != rel.Digest || !bytes.Equal(parsed.Bytes, rel.Bytes) {
		t.Errorf("digest %s, want %s", parsed.Digest, rel.Digest)
	}
	if !reflect.DeepEqual(parsed.Objects, rel.Objects) {
		t.Errorf("objects:\n%+v\nwant:\n%+v", parsed.Objects, rel.Objects)
	}
	if got := parsed.Objects[1]; got.Source != "a.yaml" || !bytes.HasPrefix(got.Body, []byte("# Source: chart/templates/b.yaml\n")) {
		t.Errorf("a document with its own Source comment: %+v", got)
	}

	t.Run("a stored stream that isn't canonical keeps its own digest", func(t *testing.T) {
		stored := []byte("# Source: a.yaml\r\n" + configMap("", "a") + "\n\n")
		parsed, err := render.Parse(stored)
		if err != nil {
			t.Fatal(err)
		}
		if parsed.Digest != render.Digest(stored) || parsed.Objects[0].Source != "a.yaml" {
			t.Errorf("release %+v", parsed)
		}
	})
}

func TestAssembleDirInputs(t *testing.T) {
	t.Run("a root that is a file is the only input, named by its base name", func(t *testing.T) {
		dir := writeTree(t, "deploy/app.manifest", configMap("", "a"), "deploy/other.yaml", configMap("", "b"))
		rel, err := render.AssembleDir(filepath.Join(dir, "deploy", "app.manifest"))
		if err != nil {
			t.Fatal(err)
		}
		if want := "# Source: app.manifest\n" + configMap("", "a"); string(rel.Bytes) != want {
			t.Errorf("stream %q, want %q", rel.Bytes, want)
		}
	})

	t.Run("a symlinked file is read and a symlinked directory is not followed", func(t *testing.T) {
		outside := writeTree(t, "cm.yaml", configMap("", "outside"), "dir/x.yaml", configMap("", "x"))
		dir := writeTree(t, "own.yaml", configMap("", "own"))
		if err := os.Symlink(filepath.Join(outside, "cm.yaml"), filepath.Join(dir, "linked.yaml")); err != nil {
			t.Skip("no symlinks here:", err)
		}
		if err := os.Symlink(filepath.Join(outside, "dir"), filepath.Join(dir, "linkdir")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(dir, filepath.Join(dir, "loop.yaml")); err != nil {
			t.Fatal(err)
		}
		rel, err := render.AssembleDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range rel.Objects {
			got = append(got, o.Source+"="+o.Name)
		}
		if want := "linked.yaml=outside own.yaml=own"; strings.Join(got, " ") != want {
			t.Errorf("objects %q, want %q", strings.Join(got, " "), want)
		}
	})

	t.Run("a symlinked root directory is read", func(t *testing.T) {
		dir := writeTree(t, "real/cm.yaml", configMap("", "a"))
		link := filepath.Join(dir, "link")
		if err := os.Symlink(filepath.Join(dir, "real"), link); err != nil {
			t.Skip("no symlinks here:", err)
		}
		rel, err := render.AssembleDir(link)
		if err != nil {
			t.Fatal(err)
		}
		if rel.Objects[0].Source != "cm.yaml" {
			t.Errorf("source %q", rel.Objects[0].Source)
		}
	})
}

// reject describes an input that must be rejected, and what the error says.
type reject struct {
	name     string
	files    []string // for AssembleDir, pairs of path and content
	stream   string   // for AssembleStream, when files is nil
	file     string
	document int
	field    string
	says     []string // in the message, besides file, document and field
}

func TestRejections(t *testing.T) {
	const identity = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n"
	cases := []reject{
		{name: "unparsable YAML", files: []string{"bad.yaml", configMap("", "a") + "---\nkind: [a, b\n"}, file: "bad.yaml", document: 2, says: []string{"(line 8)", "invalid YAML"}},
		{name: "a scalar document", files: []string{"s.yaml", "just some text\n"}, file: "s.yaml", document: 1, says: []string{"must be a mapping", "not a string"}},
		{name: "a list document", files: []string{"l.yaml", "- apiVersion: v1\n"}, file: "l.yaml", document: 1, says: []string{"not a list"}},
		{name: "a missing apiVersion", stream: "kind: A\nmetadata: {name: x}\n", file: "stdin", document: 1, field: "apiVersion", says: []string{"missing"}},
		{name: "a missing kind", files: []string{"k.yaml", configMap("", "ok") + "---\napiVersion: v1\nmetadata:\n  name: a\n"}, file: "k.yaml", document: 2, field: "kind", says: []string{"kind: missing", "(line 8)"}},
		{name: "an empty kind", stream: "apiVersion: v1\nkind: ''\nmetadata: {name: x}\n", file: "stdin", document: 1, field: "kind", says: []string{"must not be empty"}},
		{name: "a numeric kind", stream: "apiVersion: v1\nkind: 7\nmetadata: {name: x}\n", file: "stdin", document: 1, field: "kind", says: []string{"must be a string, not a number"}},
		{name: "a missing metadata", stream: "apiVersion: v1\nkind: A\n", file: "stdin", document: 1, field: "metadata", says: []string{"missing"}},
		{name: "metadata that isn't a mapping", stream: "apiVersion: v1\nkind: A\nmetadata: x\n", file: "stdin", document: 1, field: "metadata", says: []string{"must be a mapping"}},
		{name: "a missing metadata.name", files: []string{"deploy/api.yaml", identity + "  labels: {}\n"}, file: "deploy/api.yaml", document: 1, field: "metadata.name", says: []string{"missing; every document must be a Kubernetes object with apiVersion, kind and metadata.name"}},
		{name: "a null metadata.name", stream: identity + "  name:\n", file: "stdin", document: 1, field: "metadata.name", says: []string{"missing"}},
		{name: "a name that isn't a string", files: []string{"n.yaml", identity + "  name: [x]\n"}, file: "n.yaml", document: 1, field: "metadata.name", says: []string{"must be a string, not a list"}},
		{name: "a name that is a boolean", stream: identity + "  name: true\n", file: "stdin", document: 1, field: "metadata.name", says: []string{"not a boolean"}},
		{name: "a namespace that isn't a string", stream: identity + "  name: x\n  namespace: 12\n", file: "stdin", document: 1, field: "metadata.namespace", says: []string{"must be a string"}},
		{name: "a List", stream: "apiVersion: v1\nkind: List\nitems: []\nmetadata: {}\n", file: "stdin", document: 1, field: "items", says: []string{"a list of objects", "split it into separate documents"}},
		{name: "a repeated key", stream: identity + "  name: x\n  name: y\n", file: "stdin", document: 1, field: "metadata.name", says: []string{"key repeated on lines 4 and 5"}},
		{name: "a duplicate in one file", files: []string{"d.yaml", configMap("pay", "a") + "---\n" + configMap("pay", "a")}, file: "d.yaml", document: 2, says: []string{"duplicates ConfigMap pay/a from d.yaml document 1 (line 1)"}},
		{name: "a duplicate across files", files: []string{"1.yaml", configMap("pay", "a"), "2.yaml", configMap("other", "b") + "---\n" + strings.Replace(configMap("pay", "a"), "value", "other", 1)}, file: "2.yaml", document: 2, says: []string{"duplicates ConfigMap pay/a from 1.yaml document 1"}},
		{name: "a duplicate in another version of the API group", stream: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\n---\napiVersion: apps/v1beta2\nkind: Deployment\nmetadata: {name: a}\n", file: "stdin", document: 2, says: []string{"duplicates Deployment a"}},
		{name: "a sops block without mac", files: []string{"s.yaml", identity + "  name: s\nsops:\n  version: 3.9.4\n"}, file: "s.yaml", document: 1, field: "sops.mac", says: []string{"not a valid SOPS document"}},
		{name: "a sops block with an empty mac", stream: identity + "  name: s\nsops:\n  mac: ''\n", file: "stdin", document: 1, field: "sops.mac", says: []string{"not a valid SOPS document"}},
		{name: "a sops key that isn't a mapping", stream: identity + "  name: s\nsops: yes\n", file: "stdin", document: 1, field: "sops", says: []string{"not a valid SOPS document"}},
		{name: "a final block scalar without its line break", stream: configMap("", "a") + "  password: |\n    hunter2", file: "stdin", document: 1, field: "data.password", says: []string{"block scalar"}},
		{name: "a final block scalar keeping trailing blank lines", stream: configMap("", "a") + "  text: |+\n    x\n\n---\n" + configMap("", "b"), file: "stdin", document: 1, field: "data.text", says: []string{"block scalar"}},
		{name: "two documents hidden behind a line separator YAML reads", stream: configMap("", "a") + "\u2028---\u2028" + configMap("", "b"), file: "stdin", document: 1, says: []string{"more than one YAML document"}},
		{name: "an empty directory", files: []string{"README.md", "# manifests"}, says: []string{"no *.yaml, *.yml or *.json files under"}},
		{name: "a directory with only comments", files: []string{"c.yaml", "# nothing\n---\n\n", "d.yml", "---\n"}, says: []string{"no Kubernetes objects in"}},
		{name: "an empty stream", stream: "\n---\n# just a comment\n...\n", says: []string{"no Kubernetes objects in stdin"}},
		{name: "a file name with a line break", files: []string{"a\nb.yaml", configMap("", "a")}, file: `"a\nb.yaml"`, says: []string{"line break"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if c.files != nil {
				_, err = render.AssembleDir(writeTree(t, c.files...))
			} else {
				_, err = render.AssembleStream("stdin", strings.NewReader(c.stream))
			}
			checkInputError(t, err, c)
		})
	}

	t.Run("a missing path", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "nope")
		_, err := render.AssembleDir(missing)
		checkInputError(t, err, reject{file: missing, says: []string{"does not exist"}})
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%v is not an fs.ErrNotExist", err)
		}
	})

	t.Run("a release over 10 MiB of input", func(t *testing.T) {
		big := configMap("", "big") + "  blob: " + strings.Repeat("x", render.MaxReleaseBytes) + "\n"
		_, err := render.AssembleDir(writeTree(t, "big.yaml", big))
		checkInputError(t, err, reject{file: "big.yaml", says: []string{"over the limit of a release, 10485760 bytes (10.0 MiB)"}})
	})

	t.Run("a release over 10 MiB once assembled", func(t *testing.T) {
		// Under the limit as input, over it with a Source line per document.
		var b strings.Builder
		for i := 0; b.Len() < render.MaxReleaseBytes-2000; i++ {
			fmt.Fprintf(&b, "%s  blob: %s\n---\n", configMap("", fmt.Sprint("c", i)), strings.Repeat("x", 1000))
		}
		_, err := render.AssembleStream("stdin", strings.NewReader(b.String()))
		checkInputError(t, err, reject{says: []string{"the release is 10", "more than the limit of 10485760 bytes (10.0 MiB)"}})
	})

	t.Run("an endless stream is not read to its end", func(t *testing.T) {
		_, err := render.AssembleStream("stdin", endless{})
		checkInputError(t, err, reject{file: "stdin", says: []string{"over the limit"}})
	})

	t.Run("a stored stream with an invalid document", func(t *testing.T) {
		_, err := render.Parse([]byte("# Source: a.yaml\n" + configMap("", "a") + "---\n# Source: b.yaml\napiVersion: v1\nmetadata: {name: b}\n"))
		checkInputError(t, err, reject{file: "b.yaml", document: 1, field: "kind", says: []string{"(line 10)", "missing"}})
	})

	t.Run("a stored stream with a duplicate", func(t *testing.T) {
		doc := "# Source: a.yaml\n" + configMap("", "a")
		_, err := render.Parse([]byte(doc + "---\n" + doc))
		checkInputError(t, err, reject{file: "a.yaml", document: 2, says: []string{"duplicates ConfigMap a from a.yaml document 1"}})
	})

	t.Run("an empty stored stream", func(t *testing.T) {
		_, err := render.Parse(nil)
		checkInputError(t, err, reject{says: []string{"no Kubernetes objects in the release"}})
	})

	t.Run("a stored stream over 10 MiB", func(t *testing.T) {
		_, err := render.Parse(make([]byte, render.MaxReleaseBytes+1))
		checkInputError(t, err, reject{says: []string{"more than the limit"}})
	})
}

// endless is a reader that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '#'
	}
	return len(p), nil
}

func checkInputError(t *testing.T, err error, want reject) {
	t.Helper()
	if !errors.Is(err, render.ErrInvalid) {
		t.Fatalf("error %v, want one wrapping ErrInvalid", err)
	}
	var ie *render.InputError
	if !errors.As(err, &ie) {
		t.Fatalf("error %v is not an *InputError", err)
	}
	if ie.File != want.file || ie.Document != want.document || ie.Field != want.field {
		t.Errorf("error in file %q document %d field %q, want %q, %d, %q", ie.File, ie.Document, ie.Field, want.file, want.document, want.field)
	}
	msg := err.Error()
	says := want.says
	if want.file != "" {
		says = append(says, want.file+": ")
		if want.document > 0 {
			says = append(says, fmt.Sprintf("%s: document %d (line ", want.file, want.document))
		}
	}
	if want.field != "" {
		says = append(says, want.field+": ")
	}
	for _, s := range says {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not say %q", msg, s)
		}
	}
}

func TestInputErrorMessage(t *testing.T) {
	cases := []struct {
		name string
		err  render.InputError
		want string
	}{
		{"a field of a document", render.InputError{File: "deploy/api.yaml", Document: 2, Line: 14, Field: "metadata.name", Problem: "missing", Hint: "every document must be a Kubernetes object with apiVersion, kind and metadata.name"},
			"deploy/api.yaml: document 2 (line 14): metadata.name: missing; every document must be a Kubernetes object with apiVersion, kind and metadata.name"},
		{"a whole file", render.InputError{File: "a.yaml", Problem: "does not exist"}, "a.yaml: does not exist"},
		{"the whole release", render.InputError{Problem: "no Kubernetes objects in stdin", Hint: "add some"}, "no Kubernetes objects in stdin; add some"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.err.Error(); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestObjectKeyAndString(t *testing.T) {
	cases := []struct {
		name       string
		obj        render.Object
		key, human string
	}{
		{"a namespaced object of a named group", render.Object{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "prod", Name: "api"}, "apps/Deployment/prod/api", "Deployment prod/api"},
		{"a cluster-wide object of the core group", render.Object{APIVersion: "v1", Kind: "Namespace", Name: "prod"}, "/Namespace//prod", "Namespace prod"},
		{"an encrypted object with a readable identity", render.Object{APIVersion: "v1", Kind: "Secret", Namespace: "p", Name: "db", Encrypted: true}, "/Secret/p/db", "Secret p/db"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.obj.Key(); got != c.key {
				t.Errorf("Key() = %q, want %q", got, c.key)
			}
			if got := c.obj.String(); got != c.human {
				t.Errorf("String() = %q, want %q", got, c.human)
			}
		})
	}
}

func TestDigest(t *testing.T) {
	if got, want := render.Digest([]byte("abc")), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Errorf("Digest(abc) = %s, want %s", got, want)
	}
}
