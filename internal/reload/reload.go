// Package reload polls: it calls a reload function on an interval until its
// context ends, logging what changed and what failed. It serves files that
// are reloaded in place (certificates, key sets). A failed reload keeps
// whatever the function kept; reload decides that, not this package.
package reload

import (
	"context"
	"log/slog"
	"time"
)

// Every calls load every interval until ctx ends. load reports whether
// anything changed; what names it in the log lines.
func Every(ctx context.Context, interval time.Duration, log *slog.Logger, what string, load func() (bool, error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if changed, err := load(); err != nil {
				log.Warn(what+" changed but cannot be loaded; keeping the previous version", "err", err)
			} else if changed {
				log.Info(what + " reloaded")
			}
		}
	}
}
