package devcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// readyz is the part of the proxy's /readyz answer the cluster waits on.
type readyz struct {
	Ready       bool `json:"ready"`
	LiveBrokers int  `json:"live_brokers"`
}

// waitProxyReady polls a proxy's /readyz until it is ready and sees at least
// brokers live brokers. Polling the public admin API keeps the cluster honest:
// it waits on exactly what an operator would look at.
func waitProxyReady(ctx context.Context, adminAddr string, brokers int) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last readyz
	var lastErr error
	for {
		last, lastErr = getReadyz(ctx, adminAddr)
		if lastErr == nil && last.Ready && last.LiveBrokers >= brokers {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last answer %+v, last error %v)", ctx.Err(), last, lastErr)
		case <-tick.C:
		}
	}
}

func getReadyz(ctx context.Context, adminAddr string) (readyz, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+adminAddr+"/readyz", nil)
	if err != nil {
		return readyz{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return readyz{}, err
	}
	defer resp.Body.Close()
	var r readyz
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return readyz{}, fmt.Errorf("decode /readyz: %w", err)
	}
	return r, nil
}
