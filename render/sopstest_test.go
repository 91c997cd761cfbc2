package render_test

import "github.com/bucketops/bucketops/render/sopstest"

// The SOPS documents of these tests are made at test time by sopstest.
var (
	newAgeKeys    = sopstest.NewAgeKeys
	keyFile       = sopstest.KeyFile
	recipientsOf  = sopstest.Recipients
	encryptSecret = sopstest.EncryptSecret
	sopsEncrypt   = sopstest.Encrypt
	releaseStream = sopstest.Stream
)

const secretsRegex = sopstest.SecretsRegex

const (
	dbSecret = sopstest.DBSecret
	settings = sopstest.Settings
	api      = sopstest.API
)

// relDoc is one document of a release and the file it came from.
type relDoc = sopstest.Doc
