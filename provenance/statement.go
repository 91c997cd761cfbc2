package provenance

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	ita "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/bucketops/bucketops/store"
)

// PredicateType is the type of the statement's predicate, a bucketops
// release.
const PredicateType = "https://bucketops.dev/release/v1"

// PayloadType is the DSSE payload type of an in-toto statement.
const PayloadType = "application/vnd.in-toto+json"

// statement encodes what a publish attests as an in-toto Statement v1.
// Numbers are strings in the predicate: JSON numbers lose precision above
// 2^53, and generations and sequences are 64-bit.
func statement(c store.Attestation) ([]byte, error) {
	hexDigest, ok := strings.CutPrefix(c.Digest, "sha256:")
	if !ok {
		return nil, fmt.Errorf("digest %q is not sha256:<hex>", c.Digest)
	}
	fields := map[string]any{
		"app":      c.App,
		"sequence": strconv.FormatUint(c.Sequence, 10),
		"kind":     c.Kind,
		"author":   c.Author,
		"message":  c.Message,
		"source":   c.Source,
		"origin":   c.Origin,
		"previous": map[string]any{
			"generation": strconv.FormatInt(c.Previous.Generation, 10),
			"digest":     c.PreviousDigest,
		},
	}
	// Labels are left out when there are none, so a statement reads the
	// same as before labels existed.
	if len(c.Labels) > 0 {
		labels := map[string]any{}
		for k, v := range c.Labels {
			labels[k] = v
		}
		fields["labels"] = labels
	}
	pred, err := structpb.NewStruct(fields)
	if err != nil {
		return nil, err
	}
	st := &ita.Statement{
		Type:          ita.StatementTypeUri,
		Subject:       []*ita.ResourceDescriptor{{Name: c.App, Digest: map[string]string{"sha256": hexDigest}}},
		PredicateType: PredicateType,
		Predicate:     pred,
	}
	if err := st.Validate(); err != nil {
		return nil, err
	}
	return protojson.Marshal(st)
}

// parseStatement decodes a signed payload into what it attests. It is
// strict: a statement of another type, predicate or shape is refused, not
// read partly.
func parseStatement(payload []byte) (store.Attestation, error) {
	var st ita.Statement
	if err := protojson.Unmarshal(payload, &st); err != nil {
		return store.Attestation{}, fmt.Errorf("not an in-toto statement: %w", err)
	}
	if err := st.Validate(); err != nil {
		return store.Attestation{}, fmt.Errorf("not a valid in-toto statement: %w", err)
	}
	if st.GetType() != ita.StatementTypeUri {
		return store.Attestation{}, fmt.Errorf("statement type %q, want %s", st.GetType(), ita.StatementTypeUri)
	}
	if st.GetPredicateType() != PredicateType {
		return store.Attestation{}, fmt.Errorf("predicate type %q, want %s", st.GetPredicateType(), PredicateType)
	}
	if len(st.GetSubject()) != 1 {
		return store.Attestation{}, fmt.Errorf("%d subjects, want one: the app", len(st.GetSubject()))
	}
	subj := st.GetSubject()[0]
	sum := subj.GetDigest()["sha256"]
	if b, err := hex.DecodeString(sum); err != nil || len(b) != 32 {
		return store.Attestation{}, errors.New("the subject has no sha256 digest")
	}
	p := st.GetPredicate().GetFields()
	str := func(k string) string { return p[k].GetStringValue() }
	c := store.Attestation{
		App: str("app"), Digest: "sha256:" + sum, Kind: str("kind"), Author: str("author"),
		Message: str("message"), Source: str("source"), Origin: str("origin"),
	}
	if c.App != subj.GetName() {
		return store.Attestation{}, fmt.Errorf("the subject names %q and the predicate %q", subj.GetName(), c.App)
	}
	var err error
	if c.Sequence, err = strconv.ParseUint(str("sequence"), 10, 64); err != nil {
		return store.Attestation{}, fmt.Errorf("predicate sequence: %w", err)
	}
	prev := p["previous"].GetStructValue().GetFields()
	c.Previous.App = c.App
	if c.Previous.Generation, err = strconv.ParseInt(prev["generation"].GetStringValue(), 10, 64); err != nil || c.Previous.Generation < 0 {
		return store.Attestation{}, fmt.Errorf("predicate previous.generation %q is not a generation", prev["generation"].GetStringValue())
	}
	c.PreviousDigest = prev["digest"].GetStringValue()
	if l, ok := p["labels"]; ok {
		fields := l.GetStructValue().GetFields()
		if fields == nil {
			return store.Attestation{}, errors.New("predicate labels is not an object")
		}
		c.Labels = make(map[string]string, len(fields))
		for k, v := range fields {
			c.Labels[k] = v.GetStringValue()
		}
	}
	return c, nil
}

// mismatch names the first field the release's metadata shows otherwise
// than c signed, or "".
func mismatch(c store.Attestation, r store.Release) string {
	type field struct {
		name          string
		signed, shown string
	}
	for _, f := range []field{
		{"digest", c.Digest, r.Digest},
		{"sequence", strconv.FormatUint(c.Sequence, 10), strconv.FormatUint(r.Sequence, 10)},
		{"kind", c.Kind, r.Kind},
		{"author", c.Author, r.Author},
		{"message", c.Message, r.Message},
		{"source", c.Source, r.Source},
		{"origin", c.Origin, r.Origin},
		{"labels", store.EncodeLabels(c.Labels), store.EncodeLabels(r.Labels)},
	} {
		if f.signed != f.shown {
			return fmt.Sprintf("its metadata shows %s %q, the signed statement %q", f.name, trim(f.shown), trim(f.signed))
		}
	}
	return ""
}

func trim(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}

// MaxSignedText is what a signed release's author, message and source may
// hold in all: the statement repeats them (base64, a third larger) next to
// the metadata keys, and GCS takes 8 KiB of custom metadata per object.
// Measured: the rest of a signed copy's metadata (digest, kind, sequence,
// origin, publish id, key names, the envelope's fixed parts, signature and
// key id) comes to 1.1 KiB, and each byte of text costs 2.4; 2.9 KiB of
// text would fill the 8 KiB, 2.5 KiB keeps a margin for long app names.
const MaxSignedText = 2560
