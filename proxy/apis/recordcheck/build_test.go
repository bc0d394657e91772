// This file gives the tests their batches, from package probe: the
// records as kmsg encodes them, compressed by franz-go's own compressor,
// framed and given their CRC-32C, so that only what a test changes is
// wrong.

package recordcheck

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/recordcheck/probe"
)

// codecs names the codecs a test runs for, by attribute value.
var codecs = probe.Codecs()

func record(delta int32, value []byte, headers ...kmsg.Header) []byte {
	return probe.Record(delta, value, headers...)
}

func records(n, size int) []byte { return probe.Sized(n, size) }

func compress(_ testing.TB, codec uint8, raw []byte) []byte { return probe.Compress(codec, raw) }

func framed(codec uint8, count, lastDelta int32, payload []byte) []byte {
	return probe.Framed(codec, count, lastDelta, payload)
}

// valid is a valid batch of n records of size bytes, compressed by codec.
func valid(t testing.TB, codec uint8, n, size int) []byte {
	return framed(codec, int32(n), int32(n-1), compress(t, codec, records(n, size)))
}

// checker is a Checker at level l, closed at the test's end.
func checker(t testing.TB, l Level, maxBytes int) *Checker {
	t.Helper()
	c, err := New(Config{Level: l, MaxBatchBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
