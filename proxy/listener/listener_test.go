package listener

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseListeners(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		listeners, adv, protos string
		want                   []Listener
		err                    string
	}{
		{
			name:      "protocol names",
			listeners: "PLAINTEXT://127.0.0.1:9092, sasl_ssl://0.0.0.0:9093",
			adv:       "SASL_SSL://kafka.example.com:443",
			want: []Listener{
				{Name: "PLAINTEXT", Protocol: Plaintext, Addr: "127.0.0.1:9092"},
				{Name: "SASL_SSL", Protocol: SASLSSL, Addr: "0.0.0.0:9093", Advertise: "kafka.example.com:443"},
			},
		},
		{
			name:      "mapped names",
			listeners: "INTERNAL://:9092,EXTERNAL://:9093",
			protos:    "INTERNAL:PLAINTEXT,EXTERNAL:SSL",
			adv:       "INTERNAL://10.0.0.1:9092,EXTERNAL://public:9093",
			want: []Listener{
				{Name: "INTERNAL", Protocol: Plaintext, Addr: ":9092", Advertise: "10.0.0.1:9092"},
				{Name: "EXTERNAL", Protocol: SSL, Addr: ":9093", Advertise: "public:9093"},
			},
		},
		{name: "unknown name", listeners: "CLIENT://:9092", err: "neither a security protocol"},
		{name: "bad map protocol", listeners: "CLIENT://:9092", protos: "CLIENT:TLS", err: "want NAME:PROTOCOL"},
		{name: "duplicate", listeners: "SSL://:1,SSL://:2", err: "used twice"},
		{name: "no scheme", listeners: "127.0.0.1:9092", err: "NAME://HOST:PORT"},
		{name: "bad port", listeners: "SSL://:99999", err: "port"},
		{name: "advertised unknown", listeners: "SSL://:1", adv: "PLAINTEXT://h:1", err: "no listener named"},
		{name: "advertised without host", listeners: "SSL://:1", adv: "SSL://:1", err: "needs a host"},
		{name: "empty", listeners: " , ", err: "no listeners"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseListeners(tc.listeners, tc.adv, tc.protos)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("listeners (-want +got):\n%s", d)
			}
		})
	}
}
