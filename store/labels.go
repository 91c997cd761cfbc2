package store

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrInvalidLabel is wrapped by every label error.
var ErrInvalidLabel = errors.New("invalid label")

// MaxLabelBytes bounds a release's labels, encoded (k=v,k=v): they share
// the object's 8 KiB of metadata, and a signed release's statement repeats
// them.
const MaxLabelBytes = 512

// ValidateLabels checks labels as Kubernetes does (a qualified name as the
// key, a label value as the value), since ApplicationSet templates put them
// into Kubernetes objects, and their encoded size.
func ValidateLabels(labels map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("%w key %q: %s", ErrInvalidLabel, truncate(k), strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(labels[k]); len(errs) > 0 {
			return fmt.Errorf("%w %s=%q: %s", ErrInvalidLabel, k, truncate(labels[k]), strings.Join(errs, "; "))
		}
	}
	if n := len(EncodeLabels(labels)); n > MaxLabelBytes {
		return fmt.Errorf("%w: the labels come to %d bytes, the limit is %d; keep the few that route the app", ErrInvalidLabel, n, MaxLabelBytes)
	}
	return nil
}

// EncodeLabels writes labels as bucketops-labels holds them: k=v pairs
// sorted by key, joined by commas (neither may appear in a valid label).
func EncodeLabels(labels map[string]string) string {
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(labels)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + labels[k])
	}
	return b.String()
}

// ParseLabels reads bucketops-labels; a pair that isn't k=v with a valid
// label is left out, as other metadata written behind bucketops' back is.
func ParseLabels(s string) map[string]string {
	if s == "" {
		return nil
	}
	labels := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if ok && len(validation.IsQualifiedName(k)) == 0 && len(validation.IsValidLabelValue(v)) == 0 {
			labels[k] = v
		}
	}
	return labels
}
