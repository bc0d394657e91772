package broker

// Serial mode (Config.SerialRequests): the broker works on one request per
// connection at a time, as Apache Kafka and KafScale do (Kafka mutes a
// connection until its response is sent), and never advertises
// layout.UnorderedResponsesFeature. A proxy in front of it then sees the
// shape of a real broker: strangers sharing one connection wait for each
// other, so the proxy's tests and benchmarks can run both shapes.

import "github.com/twmb/franz-go/pkg/kmsg"

// maxInFlight is how many requests of one connection the broker works on
// at once: one in serial mode. The read loop takes the next request only
// once the writer took the previous one's response.
func (b *Broker) maxInFlight() int {
	if b.cfg.SerialRequests {
		return 1
	}
	return maxInFlight
}

// answersUnordered reports whether a connection that sent req gets its
// responses as soon as they are ready: never in serial mode.
func (b *Broker) answersUnordered(req *kmsg.ApiVersionsRequest) bool {
	return !b.cfg.SerialRequests && answersUnordered(req)
}
