package compat

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/testkit/testrig"
)

// compatZones are the dev cluster's broker racks: broker n is in
// compatZones[n-1].
var compatZones = []string{"zone-a", "zone-b", "zone-c"}

// zonedDriver is a driver that can tell the proxy a consumer's zone, in
// the client's own terms.
type zonedDriver interface {
	// inZone returns the driver whose consumers are in zone and how the
	// client is told so (for the doc).
	inZone(zone string) (driver, string)
}

// zoneTarget is a target whose brokers have zones.
type zoneTarget interface {
	// zoneAwayFrom is a zone whose brokers do not own topic/partition.
	zoneAwayFrom(ctx context.Context, topic string, partition int32) (string, error)
	// fetchRoutes reads the proxy's kproxy_fetch_route_total series with
	// to="zone", by reason.
	fetchRoutes(ctx context.Context) (map[string]float64, error)
}

// zoneFetch: records are read back by a consumer that names its zone, one
// whose broker does not own partition 0; at least one fetch went to that
// zone's broker instead of the owner, and the read is exactly once and in
// order.
func (h *harness) zoneFetch(t *testing.T) (string, error) {
	zt, ok := h.tg.(zoneTarget)
	if !ok {
		return "the target's brokers have no zones", errNotSupported
	}
	zd, ok := h.d.(zonedDriver)
	if !ok {
		return "the client cannot name its zone", errNotSupported
	}
	ctx, cancel := h.within(120 * time.Second)
	defer cancel()
	topic, err := h.topic(ctx, "zone")
	if err != nil {
		return "", err
	}
	recs := makeRecords(topic, 0, 300)
	if err := produceAll(ctx, h.d, h.tg.bootstrap(), topic, recs, produceOpts{}); err != nil {
		return "", err
	}
	zone, err := zt.zoneAwayFrom(ctx, topic, 0)
	if err != nil {
		return "", err
	}
	before, err := zt.fetchRoutes(ctx)
	if err != nil {
		return "", err
	}
	d, how := zd.inZone(zone)
	zh := &harness{ctx: h.ctx, tg: h.tg, d: d}
	if err := zh.readBack(ctx, t, topic, recs, 60*time.Second); err != nil {
		return "", fmt.Errorf("in %s (%s): %w", zone, how, err)
	}
	after, err := zt.fetchRoutes(ctx)
	if err != nil {
		return "", err
	}
	var from []string
	for reason, v := range after {
		if v > before[reason] {
			from = append(from, reason)
		}
	}
	if len(from) == 0 {
		return "", fmt.Errorf("%s: no fetch went to a broker of %s (kproxy_fetch_route_total{to=\"zone\"} did not move)", how, zone)
	}
	slices.Sort(from)
	return fmt.Sprintf("%s; the proxy took the zone from %s", how, strings.Join(from, ", ")), nil
}

func (d *devTarget) zoneAwayFrom(ctx context.Context, topic string, p int32) (string, error) {
	owner, ok, err := d.c.Owner(ctx, topic, p)
	if err != nil {
		return "", err
	}
	if !ok || owner < 1 || int(owner) > len(compatZones) {
		return "", fmt.Errorf("%s/%d has no owner among brokers 1-%d (%d)", topic, p, len(compatZones), owner)
	}
	return compatZones[int(owner)%len(compatZones)], nil // the next broker's zone
}

func (d *devTarget) fetchRoutes(ctx context.Context) (map[string]float64, error) {
	out := map[string]float64{}
	for _, reason := range []string{"rack", "client_id", "cidr", "proxy_zone"} {
		v, err := testrig.ScrapeCounterWhere(ctx, d.c.Proxy(0).AdminAddr(), "kproxy_fetch_route_total", `to="zone"`, `reason="`+reason+`"`)
		if err != nil {
			return nil, err
		}
		out[reason] = v
	}
	return out, nil
}
