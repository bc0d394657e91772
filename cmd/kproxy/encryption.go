package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/kproxy/kproxy/proxy/crypt"
)

// encryptionFlags configure record encryption (docs/encryption.md).
func encryptionFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag("encryption-config", "", "record encryption: a YAML file naming the KMS and the encrypted topics with their keys, reloaded when it changes (docs/encryption.md); default: no topic is encrypted"),
	}
}

// encryptionFileFrom is --encryption-config, checked before anything
// starts so that a bad file stops serve with the flag's name.
func encryptionFileFrom(c *cli.Context) (string, error) {
	file := c.String("encryption-config")
	if file == "" {
		return "", nil
	}
	raw, err := os.ReadFile(file)
	if err == nil {
		_, err = crypt.ParseFile(raw)
	}
	if err != nil {
		return "", fmt.Errorf("--encryption-config: %w", err)
	}
	return file, nil
}
