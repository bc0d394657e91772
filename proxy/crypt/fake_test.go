package crypt

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kcodec"
	"github.com/kproxy/kproxy/internal/kwire"
)

// memKMS is an in-memory KMS for the unit tests: a wrapped DEK is a
// random id it remembers. down makes every call fail as unavailable;
// refuse, as refused.
type memKMS struct {
	mu       sync.Mutex
	keys     map[string][]byte
	gens     atomic.Int64
	decrypts atomic.Int64
	down     atomic.Bool
	refuse   atomic.Bool
	// during, if set, runs inside each GenerateDataKey: what the test
	// checks while a call is outstanding.
	during func()
}

func newMemKMS() *memKMS { return &memKMS{keys: map[string][]byte{}} }

func (m *memKMS) GenerateDataKey(_ context.Context, kek string) ([]byte, []byte, error) {
	m.gens.Add(1)
	if m.during != nil {
		m.during()
	}
	if err := m.fail(); err != nil {
		return nil, nil, err
	}
	plain, id := make([]byte, 32), make([]byte, 40)
	rand.Read(plain)
	rand.Read(id)
	copy(id, kek)
	m.mu.Lock()
	m.keys[string(id)] = append([]byte(nil), plain...)
	m.mu.Unlock()
	return plain, id, nil
}

func (m *memKMS) Decrypt(_ context.Context, wrapped []byte) ([]byte, error) {
	m.decrypts.Add(1)
	if err := m.fail(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.keys[string(wrapped)]
	if !ok {
		return nil, fmt.Errorf("%w: InvalidCiphertextException", ErrKeyRefused)
	}
	return append([]byte(nil), k...), nil
}

func (m *memKMS) fail() error {
	switch {
	case m.down.Load():
		return fmt.Errorf("%w: connection refused", ErrUnavailable)
	case m.refuse.Load():
		return fmt.Errorf("%w: NotFoundException", ErrKeyRefused)
	}
	return nil
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// rec is a record to build a batch of.
type rec struct {
	key, value []byte
	headers    []kmsg.Header
}

// buildBatch encodes recs as a magic-2 batch compressed with codec.
func buildBatch(t testing.TB, c *codecs, codec int8, recs ...rec) []byte {
	t.Helper()
	var raw []byte
	for i, r := range recs {
		kr := kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: int64(i), Key: r.key, Value: r.value, Headers: r.headers}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		raw = kr.AppendTo(raw)
	}
	if codec != codecNone {
		var err error
		if raw, err = c.compress(nil, raw, codec, false); err != nil {
			t.Fatal(err)
		}
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(codec), LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp: 1700000000000, MaxTimestamp: 1700000000000 + int64(len(recs)) - 1,
		ProducerID: 7, ProducerEpoch: 3, FirstSequence: 11, NumRecords: int32(len(recs)), Records: raw,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[kwire.BatchOffLength:], uint32(len(out)-kwire.BatchLogOverhead))
	binary.BigEndian.PutUint32(out[kwire.BatchOffCRC:], kwire.BatchCRC(out))
	return out
}

// readBatch decodes one batch and its records (decompressed).
func readBatch(t testing.TB, c *codecs, b []byte) (kmsg.RecordBatch, []kmsg.Record) {
	t.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatalf("batch: %v", err)
	}
	if got := kwire.BatchCRC(b); uint32(rb.CRC) != got {
		t.Fatalf("batch CRC %x, want %x", uint32(rb.CRC), got)
	}
	if int(rb.Length)+kwire.BatchLogOverhead != len(b) {
		t.Fatalf("batch length %d for %d bytes", rb.Length, len(b))
	}
	raw := rb.Records
	if codec := int8(rb.Attributes & kwire.BatchAttrCodec); codec != codecNone {
		var err error
		if raw, err = c.decompress(nil, raw, codec, new(kcodec.Grant)); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]kmsg.Record, rb.NumRecords)
	for i := range out {
		if err := out[i].ReadFrom(raw); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		raw = raw[int(out[i].Length)+varintLen(int64(out[i].Length)):]
	}
	if len(raw) != 0 {
		t.Fatalf("%d bytes after the records", len(raw))
	}
	return rb, out
}

// encrypt is Service.Encrypt into a new buffer: the records to write (in
// as it is when not rewritten) and the code.
func encrypt(s *Service, topic string, in []byte) ([]byte, int16) {
	out, rewritten, code := s.Encrypt(context.Background(), nil, topic, 0, in)
	if !rewritten {
		out = in
	}
	return out, code
}
