package render_test

import (
	"fmt"
	"strings"

	"github.com/bucketops/bucketops/render"
)

func ExampleAssembleStream() {
	rel, err := render.AssembleStream("stdin", strings.NewReader(`
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
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
	fmt.Println(rel.Resources(), "resources")
	// Output:
	// # Source: stdin
	// apiVersion: v1
	// kind: ConfigMap
	// metadata:
	//   name: settings
	// ---
	// # Source: stdin
	// apiVersion: v1
	// kind: Namespace
	// metadata:
	//   name: payments
	// 2 resources
}

func ExampleAssembleStream_invalid() {
	_, err := render.AssembleStream("deploy.yaml", strings.NewReader("apiVersion: v1\nmetadata:\n  name: x\n"))
	fmt.Println(err)
	// Output:
	// deploy.yaml: document 1 (line 1): kind: missing; every document must be a Kubernetes object with apiVersion, kind and metadata.name
}
