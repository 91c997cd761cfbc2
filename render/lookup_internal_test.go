package render

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// lookup searches each mapping once, so a key missing from deeply nested
// merges costs the number of mappings, whatever the number of paths: here
// 10^12 paths through 14 mappings. (Parse refuses such a document for its
// aliases first; this holds lookup to it on its own.)
func TestLookupSearchesEachMappingOnce(t *testing.T) {
	var b strings.Builder
	b.WriteString("l0: &l0 {k: v}\n")
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&b, "l%d: &l%d {<<: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", i-1), 10), ","))
	}
	b.WriteString("top: {<<: *l12, name: x}\n")
	root, err := decode([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	top := directValue(root, "top")
	seen := map[*yaml.Node]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if v := lookup(top, "namespace", seen); v != nil {
			t.Errorf("found %v", v)
		}
		if v := value(top, "k"); v == nil || v.Value != "v" {
			t.Errorf("k through 12 levels of merges: %v, want v", v)
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("lookup through nested merges did not finish: it walks every path")
	}
	if len(seen) != 14 {
		t.Errorf("lookup searched %d mappings, want each of the 14 once", len(seen))
	}
}
