package store

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// MaxAppBytes is the longest app path accepted.
const MaxAppBytes = 512

// ErrInvalidApp is wrapped by every app-name and release-reference error.
var ErrInvalidApp = errors.New("invalid app")

var segmentRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`)

// ValidateApp checks an app path (prod/payments) before any request is made.
func ValidateApp(app string) error {
	if err := validatePath(app); err != nil {
		return fmt.Errorf("%w %q: %s", ErrInvalidApp, truncate(app), err)
	}
	return nil
}

// ValidatePrefix checks a listing prefix; unlike an app it may be empty.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := validatePath(strings.TrimSuffix(prefix, "/")); err != nil {
		return fmt.Errorf("%w prefix %q: %s", ErrInvalidApp, truncate(prefix), err)
	}
	return nil
}

func validatePath(p string) error {
	switch {
	case p == "":
		return errors.New("empty; an app is a path such as prod/payments")
	case len(p) > MaxAppBytes:
		return fmt.Errorf("%d bytes, the limit is %d", len(p), MaxAppBytes)
	case strings.Contains(p, ".."):
		return errors.New(`contains ".."; an app may not point outside its own path`)
	}
	for i, seg := range strings.Split(p, "/") {
		if seg == "" {
			return fmt.Errorf("segment %d is empty; remove the leading, trailing or doubled /", i+1)
		}
		if !segmentRE.MatchString(seg) {
			return fmt.Errorf("segment %q: use lowercase letters, digits, '.', '_' and '-', starting and ending with a letter or digit", seg)
		}
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// Ref names an app and optionally one of its releases: prod/payments or
// prod/payments@1712345678901234. Generation 0 means the head.
type Ref struct {
	App        string
	Generation int64
}

// ParseRef parses APP[@GENERATION] and validates the app.
func ParseRef(s string) (Ref, error) {
	app, gen, found := strings.Cut(s, "@")
	ref := Ref{App: app}
	if err := ValidateApp(app); err != nil {
		return Ref{}, err
	}
	if found {
		g, err := strconv.ParseInt(gen, 10, 64)
		if err != nil || g <= 0 {
			return Ref{}, fmt.Errorf("%w reference %q: the generation after @ must be a positive integer, as shown by bucketops log", ErrInvalidApp, truncate(s))
		}
		ref.Generation = g
	}
	return ref, nil
}

func (r Ref) String() string {
	if r.Generation == 0 {
		return r.App
	}
	return r.App + "@" + strconv.FormatInt(r.Generation, 10)
}
