package split

import (
	"context"

	"github.com/kproxy/kproxy/proxy/zone"
)

// findZone learns the client's zone once per request.
func (s *Engine) findZone(ctx context.Context) {
	if s.zoned {
		return
	}
	s.zoned = true
	if s.env.ClientZone != nil {
		s.zone, s.zsrc = s.env.ClientZone(ctx, s.rack, s.clientID)
	}
}

// locality is broker's zone.Locality to the client (Metrics.Upstream).
func (s *Engine) locality(broker int32) string {
	return zone.Locality(s.zone, s.env.Routes.Zone(broker))
}
