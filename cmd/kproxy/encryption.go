package main

import "github.com/urfave/cli/v2"

// encryptionFlags configure record encryption (docs/encryption.md).
func encryptionFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag("encryption-config", "", "record encryption: a YAML file naming the KMS and the encrypted topics with their keys, reloaded when it changes (docs/encryption.md); default: no topic is encrypted"),
	}
}
