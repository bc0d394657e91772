package apis

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestApiVersionsClusterIdentity: KIP-1242 as Kafka answers it. v5 naming
// another cluster or a node the proxy does not advertise gets
// REBOOTSTRAP_REQUIRED; only one of the two set gets INVALID_REQUEST; the
// proxy's own identity, or none, gets the versions.
func TestApiVersionsClusterIdentity(t *testing.T) {
	d, _, _ := newTestDispatcher(t, func(c *Config) { c.ClusterID, c.NodeID = "kproxy-cluster", 7 })
	for _, tc := range []struct {
		name    string
		version int16
		cluster *string
		node    int32
		want    int16
	}{
		{"the proxy's cluster and node", 5, kmsg.StringPtr("kproxy-cluster"), 7, 0},
		{"bootstrapping: neither set", 5, nil, -1, 0},
		{"another cluster", 5, kmsg.StringPtr("other-cluster"), 7, kerr.RebootstrapRequired.Code},
		{"a node the proxy does not advertise", 5, kmsg.StringPtr("kproxy-cluster"), 1, kerr.RebootstrapRequired.Code},
		{"the cluster without a node", 5, kmsg.StringPtr("kproxy-cluster"), -1, kerr.InvalidRequest.Code},
		{"a node without the cluster", 5, nil, 7, kerr.InvalidRequest.Code},
		{"node 0 without the cluster (a struct literal's zero)", 5, nil, 0, kerr.InvalidRequest.Code},
		{"another cluster, a negative node", 5, kmsg.StringPtr("kproxy-cluster"), -2, kerr.RebootstrapRequired.Code},
		{"v4 has no such fields", 4, kmsg.StringPtr("other-cluster"), 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrApiVersionsRequest()
			req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = tc.version, "test", "1"
			req.ClusterID, req.NodeID = tc.cluster, tc.node
			resp := roundTrip(t, d, req).(*kmsg.ApiVersionsResponse)
			if resp.ErrorCode != tc.want {
				t.Fatalf("error code %d (%v), want %d", resp.ErrorCode, kerr.ErrorForCode(resp.ErrorCode), tc.want)
			}
			if tc.want == 0 && len(resp.ApiKeys) < 10 || tc.want != 0 && len(resp.ApiKeys) != 0 {
				t.Fatalf("code %d with %d versions listed", resp.ErrorCode, len(resp.ApiKeys))
			}
		})
	}
}
