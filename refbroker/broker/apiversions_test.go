package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/layout"
)

// TestApiVersionsAdvertisesUnorderedResponses: the feature is listed exactly
// when the connection will be answered out of order, and survives encoding
// (it is a tagged field of v3+).
func TestApiVersionsAdvertisesUnorderedResponses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		version  int16
		software string
		want     bool
	}{
		{"kproxy v3", 3, "kproxy", true},
		{"kproxy v4", 4, "kproxy", true},
		{"other client v3", 3, "franz-go", false},
		{"kproxy v2 cannot name itself", 2, "kproxy", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrApiVersionsRequest()
			req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = tc.version, tc.software, "1"
			if got := answersUnordered(req); got != tc.want {
				t.Fatalf("answersUnordered = %v, want %v", got, tc.want)
			}
			resp := (&Broker{}).apiVersions(req).(*kmsg.ApiVersionsResponse)
			decoded := kmsg.NewPtrApiVersionsResponse()
			decoded.Version = tc.version
			if err := decoded.ReadFrom(resp.AppendTo(nil)); err != nil {
				t.Fatalf("decode v%d: %v", tc.version, err)
			}
			if len(decoded.ApiKeys) != len(implemented) {
				t.Fatalf("%d api keys, want %d", len(decoded.ApiKeys), len(implemented))
			}
			found := false
			for _, f := range decoded.SupportedFeatures {
				if f.Name == layout.UnorderedResponsesFeature {
					found = f.MinVersion == 1 && f.MaxVersion == 1
				}
			}
			if found != tc.want {
				t.Fatalf("feature %q v1 advertised = %v, want %v (features %+v)", layout.UnorderedResponsesFeature, found, tc.want, decoded.SupportedFeatures)
			}
		})
	}
}

// TestImplementedTable: every API the broker advertises has a handler (but
// the two the connection answers itself) and versions kmsg can decode.
func TestImplementedTable(t *testing.T) {
	for key, a := range implemented {
		special := key == kmsg.Produce || key == kmsg.ApiVersions
		if (a.handle == nil) != special {
			t.Errorf("%s: handler set = %v, want %v", key.Name(), a.handle != nil, !special)
		}
		req := kmsg.RequestForKey(int16(key))
		if req == nil || a.versions.min < 0 || a.versions.max > req.MaxVersion() || a.versions.min > a.versions.max {
			t.Errorf("%s: versions %+v outside what kmsg decodes", key.Name(), a.versions)
		}
	}
}
