package render

import (
	"cmp"
	"slices"

	"gopkg.in/yaml.v3"
)

// MasterKey is one key a SOPS document's data key is encrypted for, as the
// document's sops block names it.
type MasterKey struct {
	// Type is "age", "gcp_kms", or another sops key type ("kms",
	// "azure_kv", "hc_vault", "pgp"…).
	Type string
	// ID is the age recipient, the Cloud KMS resource name, or whatever
	// identifies a key of another type.
	ID string
}

// sopsKeyFields maps the key lists of a sops block to the field naming each
// key.
var sopsKeyFields = map[string]string{
	"age":      "recipient",
	"gcp_kms":  "resource_id",
	"kms":      "arn",
	"azure_kv": "vault_url",
	"hc_vault": "vault_address",
	"pgp":      "fp",
	"hckms":    "key_id",
}

// MasterKeys returns the keys an encrypted object's data key is encrypted
// for, read from its sops block (key groups included) without decrypting
// anything: what a publisher can check against a policy. It returns nil
// for an object that isn't encrypted.
func (o Object) MasterKeys() []MasterKey {
	if !o.Encrypted {
		return nil
	}
	root, err := decode(o.Body)
	if err != nil || root.Kind != yaml.MappingNode {
		return nil
	}
	sops := directValue(root, "sops")
	if sops == nil || sops.Kind != yaml.MappingNode {
		return nil
	}
	var keys []MasterKey
	collect := func(group *yaml.Node) {
		for typ, field := range sopsKeyFields {
			l := directValue(group, typ)
			if l == nil || l.Kind != yaml.SequenceNode {
				continue
			}
			for _, k := range l.Content {
				if id, ok := stringValue(directValue(resolve(k), field)); ok && id != "" {
					keys = append(keys, MasterKey{Type: typ, ID: id})
				}
			}
		}
	}
	collect(sops)
	if groups := directValue(sops, "key_groups"); groups != nil && groups.Kind == yaml.SequenceNode {
		for _, g := range groups.Content {
			if g = resolve(g); g.Kind == yaml.MappingNode {
				collect(g)
			}
		}
	}
	slices.SortFunc(keys, func(a, b MasterKey) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.ID, b.ID))
	})
	return slices.Compact(keys)
}

// MetadataKeys returns the keys of the object's metadata mapping as its
// text holds them (encrypted or not), in order.
func (o Object) MetadataKeys() []string {
	root, err := decode(o.Body)
	if err != nil || root.Kind != yaml.MappingNode {
		return nil
	}
	md := directValue(root, "metadata")
	if md == nil || md.Kind != yaml.MappingNode {
		return nil
	}
	var keys []string
	for i := 0; i+1 < len(md.Content); i += 2 {
		keys = append(keys, md.Content[i].Value)
	}
	return keys
}
