package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kproxy/kproxy/proxy/quota"
)

// quotaFlags are Kafka's quota window settings (quota.window.num and
// quota.window.size.seconds); the quotas themselves are set with
// AlterClientQuotas (docs/quotas.md).
func quotaFlags() []cli.Flag {
	return []cli.Flag{
		intFlag("quota-window-num", 11, "samples in a client quota's rate window (Kafka's quota.window.num); a client may burst (num-1) windows' worth"),
		durationFlag("quota-window-size", time.Second, "length of one sample of a client quota's rate window (Kafka's quota.window.size.seconds)"),
	}
}

func quotaFrom(c *cli.Context) (quota.Config, error) {
	q := quota.Config{Samples: c.Int("quota-window-num"), Window: c.Duration("quota-window-size")}
	if q.Samples < 2 || q.Window <= 0 {
		return q, fmt.Errorf("--quota-window-num must be at least 2 and --quota-window-size positive (got %d, %v)", q.Samples, q.Window)
	}
	return q, nil
}
