package assembly

import (
	"context"

	"github.com/kproxy/kproxy/proxy/crypt"
)

// newEncryption loads cfg.EncryptionFile; nil when there is none.
func newEncryption(ctx context.Context, cfg Config) (*crypt.Service, error) {
	if cfg.EncryptionFile == "" {
		return nil, nil
	}
	return crypt.New(ctx, crypt.Config{
		File: cfg.EncryptionFile, Logger: cfg.Logger.With("component", "crypt"), Registerer: cfg.Registry,
		LogInterval: cfg.Server.Limits.BadInputLogInterval,
	})
}
