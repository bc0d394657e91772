package kcodec

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sync/semaphore"
)

func codecs(t testing.TB, max int) (*Encoders, *Decoders) {
	t.Helper()
	e, err := NewEncoders()
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDecoders(max)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return e, d
}

// text is n bytes that compress, as record data does.
func text(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "record %d of the batch; ", i)
	}
	return b.Bytes()[:n]
}

// Every codec reads back what Encoders wrote, into a pooled buffer; a
// Grant with a Budget holds the output's capacity until it is released.
func TestRoundTrip(t *testing.T) {
	e, d := codecs(t, 1<<20)
	for _, codec := range []uint8{Gzip, Snappy, Lz4, Zstd} {
		for _, n := range []int{1, 1000, 300 << 10} {
			src := text(n)
			comp, err := e.Compress(nil, src, codec)
			if err != nil {
				t.Fatal(err)
			}
			budget := semaphore.NewWeighted(4 << 20)
			g := Grant{Budget: budget}
			buf := d.GetBuf()
			got, err := d.Decompress(codec, (*buf)[:0], comp, &g)
			if err != nil || !bytes.Equal(got, src) {
				t.Fatalf("codec %d, %d bytes: read back %d bytes, %v", codec, n, len(got), err)
			}
			if budget.TryAcquire(4<<20 - int64(cap(got)) + 1) {
				t.Fatalf("codec %d, %d bytes: the grant does not hold the output's %d bytes", codec, n, cap(got))
			}
			g.Release()
			if !budget.TryAcquire(4 << 20) {
				t.Fatalf("codec %d, %d bytes: the grant was not given back", codec, n)
			}
			*buf = got[:0]
			d.PutBuf(buf)
		}
	}
}

// An output past the bound fails with ErrTooLarge, and one past what the
// budget has left with ErrBusy, for every codec.
func TestBounds(t *testing.T) {
	const bound = 256 << 10
	e, d := codecs(t, bound)
	big := text(bound + 1)
	for _, codec := range []uint8{Gzip, Snappy, Lz4, Zstd} {
		comp, err := e.Compress(nil, big, codec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Decompress(codec, nil, comp, &Grant{}); !errors.Is(err, ErrTooLarge) {
			t.Errorf("codec %d: %d bytes over a bound of %d: %v, want ErrTooLarge", codec, len(big), bound, err)
		}
		small, err := e.Compress(nil, big[:bound/2], codec)
		if err != nil {
			t.Fatal(err)
		}
		g := Grant{Budget: semaphore.NewWeighted(1 << 10)}
		if _, err := d.Decompress(codec, nil, small, &g); !errors.Is(err, ErrBusy) {
			t.Errorf("codec %d: a budget of 1 KiB: %v, want ErrBusy", codec, err)
		}
		g.Release()
	}
	if _, err := e.Compress(nil, big, None); !errors.Is(err, ErrCodec) {
		t.Errorf("compress with None: %v, want ErrCodec", err)
	}
	if _, err := d.Decompress(5, nil, big, &Grant{}); !errors.Is(err, ErrCodec) {
		t.Errorf("decompress codec 5: %v, want ErrCodec", err)
	}
}
