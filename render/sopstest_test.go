package render_test

import (
	"strings"

	"github.com/bucketops/bucketops/render/sopstest"
)

// The SOPS documents of these tests are made at test time by sopstest.
var (
	newAgeKeys    = sopstest.NewAgeKeys
	keyFile       = sopstest.KeyFile
	recipientsOf  = sopstest.Recipients
	encryptSecret = sopstest.EncryptSecret
	sopsEncrypt   = sopstest.Encrypt
)

const secretsRegex = sopstest.SecretsRegex

// Documents of the releases these tests render.
const (
	dbSecret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: pay\ntype: Opaque\nstringData:\n  password: hunter2\n  url: postgres://db:5432/pay\n"
	settings = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: pay\ndata:\n  mode: live\n"
	api      = "# the API\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n  namespace: pay\nspec:\n  replicas: 2\n"
)

// relDoc is one document of a release and the file it came from.
type relDoc struct {
	source string
	body   string
}

// releaseStream writes documents the way a stored release holds them.
func releaseStream(docs ...relDoc) []byte {
	var b strings.Builder
	for i, d := range docs {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.WriteString("# Source: " + d.source + "\n" + d.body)
	}
	return []byte(b.String())
}
