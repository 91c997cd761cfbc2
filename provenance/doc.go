// Package provenance owns release signatures: the statement a publisher
// signs for each release, the envelope that carries it, the keys that sign
// (an Ed25519 key file, a Cloud KMS key) and the verification of one
// release, or of an app's whole history, against the keys a trust policy
// names, and the status of each release's signature that the CLI and the
// auditors' pages show (Judge).
//
// The contract. Every signed release carries, in its own object's
// bucketops-signature metadata, a DSSE envelope (payload type
// application/vnd.in-toto+json) holding an in-toto Statement v1 whose
// subject is the app with the release's sha256 digest and whose predicate
// (type PredicateType) records the app, sequence, kind, author, message,
// source, origin and the generation and digest of the release it replaced.
// The signature is made inside the publish loop, after the head was read
// and before the conditional write, so it names the exact generation the
// write replaces: the releases of an app form a hash chain, and
// generation preconditions guarantee it has no fork however many writers
// race. A release verifies when
//
//   - it is signed by a key the verifier trusts (Ed25519),
//   - the statement names this app and the digest its bytes hash to,
//   - every field its metadata shows is the one the statement signed, and
//   - the release right before it in the object's history is the one the
//     statement names as replaced.
//
// Anything else is a Problem of one of the kinds below, each saying what
// is wrong and where. Verification never trusts the metadata alone: the
// bytes are hashed, and the history is listed.
package provenance
