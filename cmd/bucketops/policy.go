package main

import (
	"context"
	"fmt"
	"io"

	"github.com/bucketops/bucketops/policy"
	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/store"
)

// policy reads the tenancy policy the writing verbs check against:
// --policy, else BUCKETOPS_POLICY; nil when neither is set. The bridge
// checks again at render: this check is for a clear error before anything
// is written.
func (f *publishFlags) policy(e *env) (*policy.Policy, error) {
	name := f.policyFile
	if name == "" {
		name = e.getenv("BUCKETOPS_POLICY")
	}
	if name == "" {
		return nil, nil
	}
	p, err := policy.Load(name)
	if err != nil {
		return nil, usageError{err}
	}
	return p, nil
}

// checkRelease refuses a release the policy doesn't allow in app.
func checkRelease(pol *policy.Policy, app string, objs []render.Object) error {
	if pol == nil {
		return nil
	}
	rule, err := pol.Rule(app)
	if err != nil {
		return err
	}
	return rule.CheckObjects(app, objs, "")
}

// checkCopy refuses a copy of src into dst that the policy doesn't allow,
// and a source release whose objects dst's rule refuses: the copy would
// be refused at render anyway.
func checkCopy(ctx context.Context, pol *policy.Policy, s *store.Store, src store.Ref, dst string) error {
	if pol == nil {
		return nil
	}
	if err := pol.CheckCopy(src.App, dst); err != nil {
		return err
	}
	rel, data, err := s.Read(ctx, src)
	if err != nil {
		return err
	}
	if rel.Kind != store.KindRelease {
		return nil // store.Copy refuses it, saying why
	}
	parsed, err := render.Parse(data)
	if err != nil {
		return fmt.Errorf("%s: %w", rel.Ref(), err)
	}
	return checkRelease(pol, dst, parsed.Objects)
}

// warnPlaintextSecrets says on stderr which Secrets of a release push
// stores in clear, when no policy is there to refuse them: the bucket,
// bucketops show and everyone who can read the bucket see their values
// (the UI redacts them; Argo CD's Redis caches them either way).
func warnPlaintextSecrets(w io.Writer, app string, objs []render.Object) {
	for _, o := range objs {
		if o.Kind == "Secret" && o.APIVersion == "v1" && !o.Encrypted {
			fmt.Fprintf(w, "bucketops: warning: %s: %s (%s) is not SOPS-encrypted: its values are stored in clear in the bucket, where anyone who can read it (and bucketops show) sees them; encrypt it with sops --encrypted-regex '^(data|stringData)$', or give --policy to refuse such pushes\n", app, o, o.Source)
		}
	}
}
