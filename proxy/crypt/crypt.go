// Package crypt encrypts record values on their way to the brokers and
// decrypts them on their way back (envelope encryption: AES-256-GCM under
// data keys that a KMS makes and wraps under a key it keeps). It promises
// that a record produced to an encrypted topic is stored only as
// ciphertext, that a record that fails authentication never reaches a
// client as plaintext (its partition gets an error instead), and that a
// KMS outage makes produce fail retriably once cached keys expire, never
// write plaintext. Its limits: values only are encrypted (keys, headers
// and timestamps stay clear), and a compromised proxy sees everything
// (docs/encryption.md has the threat model and the format).
package crypt

import (
	"bytes"
	"context"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kproxy/kproxy/internal/ratelog"
	"github.com/kproxy/kproxy/internal/reload"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
)

// Config configures a Service.
type Config struct {
	File       string // the encryption configuration file (File)
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil: metrics kept, not exported
	Now        func() time.Time      // default time.Now
	// KMS, if set, replaces the KMS the file names (tests).
	KMS KMS
	// CheckEvery is how often the file is looked at again [5s];
	// LogInterval spaces the log lines of one kind of failure [10s].
	CheckEvery, LogInterval time.Duration
}

// Service encrypts and decrypts the record data of the topics its file
// names. It is safe for concurrent use.
type Service struct {
	cfg    Config
	cur    atomic.Pointer[state]
	keys   *keys
	codecs *codecs
	m      *metrics
	log    *ratelog.Logger
	raw    []byte // the file's contents last loaded; owned by Run
}

// state is one load of the file.
type state struct {
	file File
	pol  *policy
	kms  KMS
}

// New loads cfg.File; an error means it is unusable.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CheckEvery <= 0 {
		cfg.CheckEvery = 5 * time.Second
	}
	if cfg.LogInterval <= 0 {
		cfg.LogInterval = 10 * time.Second
	}
	raw, err := os.ReadFile(cfg.File)
	if err != nil {
		return nil, fmt.Errorf("crypt: %w", err)
	}
	st, err := load(ctx, cfg, raw, nil)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, m: newMetrics(cfg.Registerer), raw: raw,
		log: ratelog.New(cfg.Logger, slog.LevelWarn, cfg.LogInterval, cfg.Now)}
	if s.codecs, err = newCodecs(st.file.MaxBatchBytes, st.file.DecompressBudgetBytes); err != nil {
		return nil, err
	}
	s.codecs.count = s.m
	s.keys = newKeys(st.file.limits(), cfg.Now, func(op, result string) { s.m.kmsCalls.WithLabelValues(op, result).Inc() })
	s.cur.Store(st)
	return s, nil
}

// load parses raw, keeping prev's KMS client when its settings are the same.
func load(ctx context.Context, cfg Config, raw []byte, prev *state) (*state, error) {
	f, err := ParseFile(raw)
	if err != nil {
		return nil, err
	}
	pol, _ := compile(f) // ParseFile checked it
	st := &state{file: f, pol: pol, kms: cfg.KMS}
	switch {
	case st.kms != nil:
	case prev != nil && prev.file.KMS == f.KMS:
		st.kms = prev.kms
	default:
		if st.kms, err = newAWSKMS(ctx, f.KMS); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// Run reloads the file when it changes, until ctx ends. A file that does
// not load keeps the previous one. The DEK limits and max_batch_bytes of
// the first load stay until a restart.
func (s *Service) Run(ctx context.Context) error {
	reload.Every(ctx, s.cfg.CheckEvery, s.cfg.Logger, "encryption config "+s.cfg.File, func() (bool, error) {
		return s.reload(ctx)
	})
	s.codecs.close()
	return nil
}

func (s *Service) reload(ctx context.Context) (bool, error) {
	raw, err := os.ReadFile(s.cfg.File)
	if err != nil {
		return true, fmt.Errorf("crypt: %w", err)
	}
	if bytes.Equal(raw, s.raw) {
		return false, nil
	}
	st, err := load(ctx, s.cfg, raw, s.cur.Load())
	if err != nil {
		return true, err
	}
	s.raw = raw
	s.cur.Store(st)
	return true, nil
}

// Encrypted reports whether topic's records are encrypted: a map lookup
// (and a match per glob rule), for the produce and fetch paths to keep
// every other topic's records untouched.
func (s *Service) Encrypted(topic string) bool { return s.cur.Load().pol.rule(topic) >= 0 }

// Encrypt appends a partition's produce record data, each value
// encrypted, to dst and returns it with rewritten set; or returns the Kafka
// error code to answer the partition with (nothing is to be written). When
// rewritten is false and code 0 the records are to be written as they are:
// the topic is not encrypted, or its key was refused under passthrough.
func (s *Service) Encrypt(ctx context.Context, dst []byte, topic string, part int32, records []byte) (out []byte, rewritten bool, code int16) {
	return s.EncryptChecked(ctx, dst, topic, part, records, nil)
}

// EncryptChecked is Encrypt of records that produce validation read at
// level Full into checked (recordcheck.Checker.CheckBatch; nil or empty:
// not read so): its records, already decompressed, are
// encrypted instead of being decompressed again, and the CRC-32C it
// checked is not computed again. checked must still hold them (not
// Released) and be of these very bytes; a Batch of other bytes is ignored.
// When a new DEK must come from the KMS, EncryptChecked Releases checked
// before the call (the caller's Release after is then a no-op) and
// decompresses the records itself.
func (s *Service) EncryptChecked(ctx context.Context, dst []byte, topic string, part int32, records []byte, checked *recordcheck.Batch) (out []byte, rewritten bool, code int16) {
	st := s.cur.Load()
	kek, ok := st.pol.kek(topic)
	if !ok {
		return nil, false, 0
	}
	n := countRecords(records)
	// Validation's decompressed records hold part of its budget, which a
	// KMS call of seconds (an outage's timeout) must not keep from other
	// produces: let them go, and decompress here, after the call.
	d, err := s.keys.sealerFor(ctx, st.kms, kek, n, func() {
		if checked != nil {
			checked.Release()
		}
	})
	if err != nil {
		if errors.Is(err, ErrKeyRefused) && st.pol.passthrough {
			s.m.passthrough.WithLabelValues(topic).Inc()
			s.log.Log("passthrough", "produce written in plaintext: the KMS refused the topic's key and unresolved_key is passthrough",
				"topic", topic, "partition", part, "err", err)
			return nil, false, 0
		}
		return nil, false, s.failed("produce", topic, part, err)
	}
	sl := sealer{aead: d.aead, wrapped: d.wrapped, nonces: make([]byte, n*NonceSize)}
	// Random 96-bit nonces: a DEK seals at most MaxEncryptions (5,000,000)
	// records, and the chance that two of 5e6 random 96-bit nonces collide
	// is about (5e6)^2/2^97, 1.6e-16, far below NIST's 2^-32 bound for
	// random GCM nonces. One read serves the whole batch.
	rand.Read(sl.nonces)
	grow := n * (TagSize + headerLen(len(d.wrapped)) + len(HeaderKey) + 2*binaryMaxVarint)
	dst = slices.Grow(dst[:0], len(records)+grow)
	out, err = s.codecs.rewriteSet(dst, records, true, checked, func(dst, recs []byte, n int) ([]byte, bool, error) {
		changed := false
		err := eachRecord(recs, n, func(raw []byte, r record) error {
			var err error
			changed = changed || r.value != nil
			dst, err = sl.appendSealed(dst, raw, r)
			return err
		})
		return dst, changed, err
	})
	if err != nil {
		return nil, false, s.failed("produce", topic, part, err)
	}
	s.m.records.WithLabelValues("encrypt").Inc()
	return out, true, 0
}

// SizeHint is about the size of records encrypted (for a buffer to
// encrypt them into; Encrypt grows it if need be).
func SizeHint(records []byte) int {
	return len(records) + countRecords(records)*(TagSize+NonceSize+256+len(HeaderKey)+2*binaryMaxVarint)
}

// binaryMaxVarint bounds the varints a record's encryption adds.
const binaryMaxVarint = 5

// Decrypt returns a partition's fetched record data with each encrypted
// value decrypted (records written before encryption pass as they are),
// or the Kafka error code to answer the partition with instead.
func (s *Service) Decrypt(ctx context.Context, topic string, part int32, records []byte) ([]byte, int16) {
	st := s.cur.Load()
	if len(records) == 0 || st.pol.rule(topic) < 0 {
		return records, 0
	}
	op := opener{key: func(w []byte) (cipher.AEAD, error) { return s.keys.opener(ctx, st.kms, w) }}
	out, err := s.codecs.rewriteSet(make([]byte, 0, len(records)), records, false, nil, func(dst, recs []byte, n int) ([]byte, bool, error) {
		changed := false
		err := eachRecord(recs, n, func(raw []byte, r record) error {
			var opened bool
			var err error
			dst, opened, err = op.appendOpened(dst, raw, r)
			changed = changed || opened
			return err
		})
		return dst, changed, err
	})
	if err != nil {
		return nil, s.failed("fetch", topic, part, err)
	}
	s.m.records.WithLabelValues("decrypt").Inc()
	return out, 0
}
