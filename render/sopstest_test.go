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
