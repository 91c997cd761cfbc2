package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/bucketops/bucketops/policy"
	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/render/sopstest"
)

const twoTeams = `
rules:
  - prefix: team-a
    projects: [team-a]
    namespaces: [team-a, team-a-*]
    decryptionKeys: [%A%]
  - prefix: team-a/platform
    projects: [platform]
    namespaces: ["*"]
    allowClusterScoped: true
  - prefix: team-b
    projects: [team-b]
    namespaces: [team-b]
    decryptionKeys: [%B%, gcpkms://projects/p/locations/global/keyRings/r/cryptoKeys/team-b]
    promoteFrom: [staging/team-b]
`

func parse(t *testing.T, text string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func objects(t *testing.T, docs ...string) []render.Object {
	t.Helper()
	rel, err := render.AssembleStream("release.yaml", strings.NewReader(strings.Join(docs, "---\n")))
	if err != nil {
		t.Fatal(err)
	}
	return rel.Objects
}

func TestRulesMatchWholeSegmentsLongestFirst(t *testing.T) {
	p := parse(t, strings.NewReplacer("%A%", "age1a", "%B%", "age1b").Replace(twoTeams))
	for app, want := range map[string]string{
		"team-a/api":          "team-a",
		"team-a":              "team-a",
		"team-a/platform/crd": "team-a/platform",
		"team-b/web":          "team-b",
	} {
		r, ok := p.RuleFor(app)
		if !ok || r.Prefix != want {
			t.Errorf("%s: rule %v %v, want %q", app, r, ok, want)
		}
	}
	for _, app := range []string{"team-ab/api", "team", "staging/team-b/web"} {
		if _, err := p.Rule(app); !errors.Is(err, policy.ErrDenied) || !strings.Contains(err.Error(), "no rule") {
			t.Errorf("%s: %v, want a denial naming the missing rule", app, err)
		}
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	for name, tc := range map[string]struct{ text, want string }{
		"no rules":             {"rules: []\n", "no rules"},
		"unknown field":        {"rules:\n  - prefix: a\n    project: [x]\n", `unknown field "project": did you mean "projects"?`},
		"no projects":          {"rules:\n  - prefix: a\n    namespaces: [a]\n", "no projects"},
		"no namespaces":        {"rules:\n  - prefix: a\n    projects: [a]\n", "no namespaces"},
		"bad prefix":           {"rules:\n  - prefix: ../a\n    projects: [a]\n    namespaces: [a]\n", `".."`},
		"secret key":           {"rules:\n  - prefix: a\n    projects: [a]\n    namespaces: [a]\n    decryptionKeys: [AGE-SECRET-KEY-1XYZ]\n", "never a secret key"},
		"short kms key":        {"rules:\n  - prefix: a\n    projects: [a]\n    namespaces: [a]\n    decryptionKeys: [gcpkms://projects/p/cryptoKeys/k]\n", "gcpkms://projects/P/locations/L"},
		"duplicate prefix":     {"rules:\n  - {prefix: a, projects: [a], namespaces: [a]}\n  - {prefix: a/, projects: [b], namespaces: [b]}\n", "same prefix"},
		"bad namespace":        {"rules:\n  - {prefix: a, projects: [a], namespaces: ['a[']}\n", "malformed"},
		"bad promoteFrom":      {"rules:\n  - {prefix: a, projects: [a], namespaces: [a], promoteFrom: ['']}\n", "promoteFrom"},
		"not yaml":             {"rules: [\n", "policy:"},
		"second rule is named": {"rules:\n  - {prefix: a, projects: [a], namespaces: [a]}\n  - {prefix: b, namespaces: [b]}\n", `rule 2 (prefix "b")`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := policy.Parse([]byte(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	t.Run("all problems at once", func(t *testing.T) {
		_, err := policy.Parse([]byte("rules:\n  - prefix: a\n  - prefix: b\n"))
		if err == nil || strings.Count(err.Error(), "no projects") != 2 || strings.Count(err.Error(), "no namespaces") != 2 {
			t.Errorf("error %v, want the four problems", err)
		}
	})
}

func TestContentRules(t *testing.T) {
	keys := sopstest.NewAgeKeys(t, 2)
	a, b := keys[0].Recipient().String(), keys[1].Recipient().String()
	p := parse(t, strings.NewReplacer("%A%", a, "%B%", b).Replace(twoTeams))
	ruleA, _ := p.RuleFor("team-a/api")
	platform, _ := p.RuleFor("team-a/platform/crds")
	secretA := string(sopstest.EncryptSecret(t, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: team-a\nstringData:\n  password: hunter2\n", a))
	secretB := string(sopstest.EncryptSecret(t, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: team-b\nstringData:\n  password: s3cret\n", b))
	cm := func(ns string) string {
		md := "  name: cm\n"
		if ns != "" {
			md += "  namespace: " + ns + "\n"
		}
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n" + md
	}
	for _, tc := range []struct {
		name        string
		rule        *policy.Rule
		docs        []string
		destination string
		reason      string // "" when allowed
		mention     string
	}{
		{"objects in allowed namespaces", ruleA, []string{cm("team-a"), cm("team-a-jobs"), secretA}, "team-a", "", ""},
		{"an object in another team's namespace", ruleA, []string{cm("team-b")}, "", policy.ReasonNamespace, `"team-b"`},
		{"no namespace, destination allowed", ruleA, []string{cm("")}, "team-a", "", ""},
		{"no namespace, destination not allowed", ruleA, []string{cm("")}, "kube-system", policy.ReasonNamespace, "destination namespace \"kube-system\""},
		{"no namespace, destination unknown at push", ruleA, []string{cm("")}, "", "", ""},
		{"a cluster-scoped object", ruleA, []string{"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: admin\n"}, "", policy.ReasonClusterScoped, "ClusterRole admin"},
		{"a cluster-scoped object where allowed", platform, []string{"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n"}, "", "", ""},
		{"a plaintext Secret", ruleA, []string{"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: team-a\nstringData:\n  password: x\n"}, "", policy.ReasonPlaintextSecret, "Secret team-a/db"},
		{"another team's encrypted Secret", ruleA, []string{secretB}, "", policy.ReasonKey, b},
		{"another team's Secret moved with a renamed namespace key", ruleA,
			[]string{strings.Replace(secretB, "  namespace: team-b\n", "  generateName: team-b\n", 1)}, "team-a", policy.ReasonEncrypted, `"generateName"`},
		{"an encrypted identity", ruleA, []string{string(mustEncryptAll(t, a))}, "team-a", policy.ReasonEncrypted, "identity encrypted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.rule.CheckObjects("team-a/api", objects(t, tc.docs...), tc.destination)
			var v *policy.Violation
			switch {
			case tc.reason == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.reason == "":
			case !errors.As(err, &v) || v.Reason != tc.reason || !strings.Contains(err.Error(), tc.mention):
				t.Errorf("error %v, want reason %s mentioning %q", err, tc.reason, tc.mention)
			}
		})
	}
}

func mustEncryptAll(t *testing.T, recipient string) []byte {
	doc, _ := sopstest.Encrypt(t, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: x\n", "", recipient)
	return doc
}

func TestProjectsAndCopies(t *testing.T) {
	p := parse(t, strings.NewReplacer("%A%", "age1a", "%B%", "age1b").Replace(twoTeams)+
		"  - {prefix: staging, projects: [\"*\"], namespaces: [\"*\"]}\n")
	ruleA, _ := p.RuleFor("team-a/api")
	if err := ruleA.CheckProject("team-a/api", "team-a"); err != nil {
		t.Errorf("team-a's project: %v", err)
	}
	for _, project := range []string{"team-b", "default", ""} {
		if err := ruleA.CheckProject("team-a/api", project); !errors.Is(err, policy.ErrDenied) {
			t.Errorf("project %q on team-a's app: %v, want denied", project, err)
		}
	}
	staging, _ := p.RuleFor("staging/x")
	if err := staging.CheckProject("staging/x", "anything"); err != nil {
		t.Errorf(`"*" refuses a project: %v`, err)
	}
	for _, tc := range []struct {
		src, dst string
		ok       bool
	}{
		{"team-a/api", "team-a/api", true},          // rollback
		{"team-a/api", "team-a/web", true},          // within the rule
		{"team-a/api", "team-b/web", false},         // across teams
		{"team-b/web", "team-a/api", false},         // across teams
		{"staging/team-b/web", "team-b/web", true},  // promoteFrom
		{"staging/team-a/api", "team-a/api", false}, // not in team-a's promoteFrom
		{"team-a/platform/x", "team-a/api", false},  // another rule, though under the prefix
	} {
		err := p.CheckCopy(tc.src, tc.dst)
		if (err == nil) != tc.ok {
			t.Errorf("copy %s to %s: %v, want allowed=%v", tc.src, tc.dst, err, tc.ok)
		}
	}
}

// TestMisspeltFieldIsNamedWithASuggestion: a typo in the policy file is
// an error naming the line, the field as written, the field meant and the
// fields a rule has, not a Go type name.
func TestMisspeltFieldIsNamedWithASuggestion(t *testing.T) {
	_, err := policy.Parse([]byte("rules:\n  - prefix: team-a/\n    namespace: [team-a]\n  - prefix: team-b/\n    allowClusterscoped: true\n    colour: blue\n"))
	if err == nil {
		t.Fatal("a policy with misspelt fields parsed")
	}
	msg := err.Error()
	for _, want := range []string{
		`line 3: unknown field "namespace": did you mean "namespaces"?`,
		`line 5: unknown field "allowClusterscoped": did you mean "allowClusterScoped"?`,
		`line 6: unknown field "colour" (known here: prefix, projects, namespaces,`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q\ndoes not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "policy.Rule") {
		t.Errorf("error %q names a Go type", msg)
	}
}
