package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// FetchReadiness reads a proxy's /readyz answer (200 and 503 both carry it).
func FetchReadiness(ctx context.Context, adminAddr string) (Readiness, error) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, "http://"+adminAddr+"/readyz", nil)
	if err != nil {
		return Readiness{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Readiness{}, fmt.Errorf("read %s/readyz: %w", adminAddr, err)
	}
	defer resp.Body.Close()
	var r Readiness
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return Readiness{}, fmt.Errorf("decode %s/readyz: %w", adminAddr, err)
	}
	return r, nil
}

// WaitReady polls a proxy's /readyz until it is ready and sees at least
// minBrokers live brokers, or ctx ends. It waits on exactly what an operator
// (or a load balancer's health check) would look at.
func WaitReady(ctx context.Context, adminAddr string, minBrokers int) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		last, err := FetchReadiness(ctx, adminAddr)
		if err == nil && last.Ready && last.LiveBrokers >= minBrokers {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("proxy %s not ready with %d brokers: %w (last answer %+v, last error %v)", adminAddr, minBrokers, ctx.Err(), last, err)
		case <-tick.C:
		}
	}
}
