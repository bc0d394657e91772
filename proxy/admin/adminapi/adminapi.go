// Package adminapi is the proxy's admin HTTP API as its callers see it: the
// body of /readyz and a client that reads it. The proxy serves the type
// (package proxy); `kproxy dev` and the test rigs wait on it. It imports
// nothing of the proxy, so a caller that only polls readiness stays small.
package adminapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Readiness is the body of /readyz.
type Readiness struct {
	Ready           bool    `json:"ready"`
	Synced          bool    `json:"synced"`    // the routing watch applied its first full listing
	Connected       bool    `json:"connected"` // the routing watch is established
	Revision        int64   `json:"revision"`  // etcd revision the routing table is complete up to
	LiveBrokers     int     `json:"live_brokers"`
	RouteAgeSeconds float64 `json:"route_age_seconds"` // since etcd last confirmed the table
	// MissingBrokers own partitions or groups but have no address: those
	// get retriable errors (KafScale's snapshot can lag its brokers).
	MissingBrokers []int32 `json:"missing_brokers,omitempty"`
	Draining       bool    `json:"draining"`
	// Zone is the proxy's own zone; FetchFrom is where fetches go
	// (FetchZone or FetchOwner).
	Zone      string `json:"zone,omitempty"`
	FetchFrom string `json:"fetch_from,omitempty"`
}

// Where fetches go (Readiness.FetchFrom, and the values of the proxy's
// fetch-from setting).
const (
	FetchZone  = "zone"  // a broker of the client's zone (routing.RouteRead)
	FetchOwner = "owner" // the partition's owner
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
