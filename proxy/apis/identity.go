package apis

// The cluster identity an ApiVersions v5+ request carries (KIP-1242): a
// client that DNS or a balancer change sent to another cluster learns it
// from its first request and rebootstraps.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// identityError is the error Kafka answers an ApiVersions request with for
// the cluster and node it names, or 0: INVALID_REQUEST when only one of
// ClusterID and NodeID is set, REBOOTSTRAP_REQUIRED when they are not the
// cluster id Metadata reports and the node id the proxy advertises (its one
// node, metadata.go). Kafka checks the same pair in
// KafkaApis.handleApiVersionsRequest (clusterIdOrNodeIdIsInvalid).
func (d *Dispatcher) identityError(req *kmsg.ApiVersionsRequest) int16 {
	if req.Version < 5 {
		return 0
	}
	// -1 is "no node" (bootstrapping); any other value names one, 0
	// included: Kafka 4.4 refuses a NodeID 0 without a ClusterID.
	cluster, node := req.ClusterID != nil, req.NodeID != -1
	switch {
	case cluster != node:
		return kerr.InvalidRequest.Code
	case !cluster:
		return 0
	case *req.ClusterID != d.cfg.ClusterID || req.NodeID != d.cfg.NodeID:
		return kerr.RebootstrapRequired.Code
	}
	return 0
}

// apiVersionsError is Kafka's error answer to ApiVersions: the error code
// at the request's version, with no versions listed.
func apiVersionsError(version, code int16) Reply {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	resp.ErrorCode = code
	return Reply{Body: resp.AppendTo(nil)}
}
