package render_test

import (
	"fmt"
	"strings"

	"github.com/bucketops/bucketops/render"
)

func ExampleAssembleStream() {
	// The output of helm template or kustomize build, piped to stdin.
	rel, err := render.AssembleStream("stdin", strings.NewReader(`---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: payments
data:
  mode: live


---
# nothing here
---
apiVersion: v1
kind: Namespace
metadata:
  name: payments
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(rel.Bytes))
	for _, o := range rel.Objects {
		fmt.Println(o)
	}

	_, err = render.AssembleStream("stdin", strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: payments\n"))
	fmt.Println(err)
	// Output:
	// # Source: stdin
	// apiVersion: v1
	// kind: ConfigMap
	// metadata:
	//   name: settings
	//   namespace: payments
	// data:
	//   mode: live
	// ---
	// # Source: stdin
	// apiVersion: v1
	// kind: Namespace
	// metadata:
	//   name: payments
	// ConfigMap payments/settings
	// Namespace payments
	// stdin: document 1 (line 1): metadata.name: missing; every document must be a Kubernetes object with apiVersion, kind and metadata.name
}
