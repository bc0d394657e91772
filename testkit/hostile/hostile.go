// Package hostile sends the hostile client traffic of issues 12 and 20 to
// a Kafka address: attacker connections cycling through random frames,
// absurd and negative lengths, truncated headers, unknown keys and
// versions, valid headers with random bodies or huge claimed array
// lengths, slow writers, fetches pipelined and never read, connections
// closed in the middle of an answer and half-sent frames, plus a crowd of
// idle connections. It checks nothing itself: the caller measures the
// target (measure.go) while it runs.
package hostile

import (
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config says how much traffic to send. Zero values take the defaults in
// brackets.
type Config struct {
	Addr      string
	Attackers int           // connections sending bad input at once [16]
	Idle      int           // idle connections held open [0]
	Seed      uint64        // of the random choices
	ConnLife  time.Duration // longest an attacker keeps one connection [2s]
	// Patterns names the behaviours attackers pick from (Patterns()) [all].
	Patterns []string
	// FetchTopic is the topic the fetching patterns read, partition 0
	// ["hostile"]: one with data makes their answers large.
	FetchTopic string
	// Pause, if set, paces each attacker: it waits this long after every
	// frame it sends, so that the traffic tests the proxy's memory and
	// fairness rather than how many CPU cycles the sender can take from
	// clients on the same machine.
	Pause time.Duration
}

// Stats counts what Run did.
type Stats struct {
	Dials      int64 // attacker connections opened
	Frames     int64 // bad frames sent
	IdleOpened int64 // idle connections opened
	DialErrors int64
}

// Run sends traffic until ctx ends, then closes every connection it opened
// and returns.
func Run(ctx context.Context, cfg Config) Stats {
	if cfg.Attackers == 0 {
		cfg.Attackers = 16
	}
	if cfg.ConnLife == 0 {
		cfg.ConnLife = 2 * time.Second
	}
	if cfg.FetchTopic == "" {
		cfg.FetchTopic = "hostile"
	}
	pick := behaviours
	if len(cfg.Patterns) > 0 {
		pick = nil
		for _, b := range behaviours {
			if slices.Contains(cfg.Patterns, b.name) {
				pick = append(pick, b)
			}
		}
		if len(pick) == 0 {
			return Stats{}
		}
	}
	cfg.Patterns = nil
	st := stats{pause: cfg.Pause}
	var wg sync.WaitGroup
	for i := range cfg.Attackers {
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(i)))
		wg.Go(func() { attack(ctx, cfg, pick, rng, &st) })
	}
	wg.Go(func() { holdIdle(ctx, cfg, &st) })
	wg.Wait()
	return Stats{Dials: st.dials.Load(), Frames: st.frames.Load(), IdleOpened: st.idle.Load(), DialErrors: st.dialErrs.Load()}
}

type stats struct {
	dials, frames, idle, dialErrs atomic.Int64
	pause                         time.Duration // Config.Pause
}

func dial(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	return d.DialContext(ctx, "tcp", addr)
}

// holdIdle opens cfg.Idle connections and keeps them until ctx ends.
func holdIdle(ctx context.Context, cfg Config, st *stats) {
	conns := make([]net.Conn, 0, cfg.Idle)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for len(conns) < cfg.Idle && ctx.Err() == nil {
		c, err := dial(ctx, cfg.Addr)
		if err != nil {
			st.dialErrs.Add(1)
			select { // a refused or full backlog: try again shortly
			case <-time.After(10 * time.Millisecond):
			case <-ctx.Done():
			}
			continue
		}
		conns = append(conns, c)
		st.idle.Add(1)
	}
	<-ctx.Done()
}

// attack opens one connection after another, each running one behaviour.
func attack(ctx context.Context, cfg Config, pick []behaviour, rng *rand.Rand, st *stats) {
	for ctx.Err() == nil {
		c, err := dial(ctx, cfg.Addr)
		if err != nil {
			st.dialErrs.Add(1)
			select {
			case <-time.After(10 * time.Millisecond):
			case <-ctx.Done():
			}
			continue
		}
		st.dials.Add(1)
		life, cancel := context.WithTimeout(ctx, cfg.ConnLife)
		stop := context.AfterFunc(life, func() { c.Close() })
		b := pick[rng.IntN(len(pick))]
		if !b.noRead {
			go func() { _, _ = io.Copy(io.Discard, c) }() // answers, until the close
		}
		b.run(life, c, &cfg, rng, st)
		stop()
		cancel()
		c.Close()
	}
}

type behaviour struct {
	name   string
	noRead bool // the behaviour reads answers itself, or never
	run    func(ctx context.Context, c net.Conn, cfg *Config, rng *rand.Rand, st *stats)
}

// plain adapts a behaviour that needs nothing of the Config.
func plain(f func(ctx context.Context, c net.Conn, rng *rand.Rand, st *stats)) func(context.Context, net.Conn, *Config, *rand.Rand, *stats) {
	return func(ctx context.Context, c net.Conn, _ *Config, rng *rand.Rand, st *stats) { f(ctx, c, rng, st) }
}

var behaviours = []behaviour{
	{name: "random_frames", run: plain(randomFrames)},
	{name: "absurd_length", run: plain(absurdLength)},
	{name: "big_claim", run: plain(bigClaim)},
	{name: "truncated_header", run: plain(truncatedHeader)},
	{name: "unknown_api", run: plain(unknownAPI)},
	{name: "random_bodies", run: plain(randomBodies)},
	{name: "huge_arrays", run: plain(hugeArrays)},
	{name: "slow_writer", run: plain(slowWriter)},
	{name: "pipelined_never_read", noRead: true, run: pipelinedNeverRead},
	{name: "closed_mid_response", noRead: true, run: closedMidResponse},
	{name: "half_sent_frame", run: plain(halfSentFrame)},
}

// Patterns names every behaviour, for Config.Patterns.
func Patterns() []string {
	names := make([]string, len(behaviours))
	for i, b := range behaviours {
		names[i] = b.name
	}
	return names
}

// send writes b, reporting whether the connection still takes bytes.
func send(c net.Conn, st *stats, b []byte) bool {
	st.frames.Add(1)
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, err := c.Write(b)
	if st.pause > 0 {
		time.Sleep(st.pause)
	}
	return err == nil
}

func frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func randomFrames(ctx context.Context, c net.Conn, rng *rand.Rand, st *stats) {
	for ctx.Err() == nil && send(c, st, frame(randBytes(rng, rng.IntN(4<<10)))) {
	}
}

func absurdLength(_ context.Context, c net.Conn, rng *rand.Rand, st *stats) {
	sizes := []uint32{0x7fffffff, 0x80000000, 0xffffffff, 0xfffffff0}
	send(c, st, append(binary.BigEndian.AppendUint32(nil, sizes[rng.IntN(len(sizes))]), randBytes(rng, 64)...))
}

// bigClaim claims nearly the largest frame the proxy accepts and sends a
// little of it, then waits.
func bigClaim(ctx context.Context, c net.Conn, rng *rand.Rand, st *stats) {
	send(c, st, append(binary.BigEndian.AppendUint32(nil, 100<<20-1-uint32(rng.IntN(1<<20))), randBytes(rng, 512)...))
	<-ctx.Done()
}

func truncatedHeader(_ context.Context, c net.Conn, rng *rand.Rand, st *stats) {
	send(c, st, frame(randBytes(rng, 1+rng.IntN(7))))
}

func header(key, version int16, corr int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 7)
	b = append(b, "hostile"...)
	if req := kmsg.RequestForKey(key); req != nil && version <= req.MaxVersion() && version >= 0 {
		req.SetVersion(version)
		if req.IsFlexible() {
			b = append(b, 0)
		}
	}
	return b
}

func unknownAPI(ctx context.Context, c net.Conn, rng *rand.Rand, st *stats) {
	for i := int32(0); ctx.Err() == nil && i < 100; i++ {
		key, version := int16(200+rng.IntN(5000)), int16(rng.IntN(3))
		if rng.IntN(2) == 0 {
			key, version = int16(rng.IntN(20)), int16(100+rng.IntN(1000))
		}
		if !send(c, st, frame(header(key, version, i))) {
			return
		}
	}
}

// splitKeys are the requests the proxy decodes and splits.
var splitKeys = []kmsg.Key{kmsg.Produce, kmsg.Fetch, kmsg.ListOffsets, kmsg.Metadata, kmsg.OffsetCommit,
	kmsg.OffsetFetch, kmsg.FindCoordinator, kmsg.OffsetForLeaderEpoch, kmsg.DeleteRecords, kmsg.JoinGroup}

func validKey(rng *rand.Rand) (int16, int16) {
	k := splitKeys[rng.IntN(len(splitKeys))]
	return int16(k), int16(rng.IntN(int(kmsg.RequestForKey(int16(k)).MaxVersion()) + 1))
}

func randomBodies(ctx context.Context, c net.Conn, rng *rand.Rand, st *stats) {
	for i := int32(0); ctx.Err() == nil && i < 100; i++ {
		key, version := validKey(rng)
		if !send(c, st, frame(append(header(key, version, i), randBytes(rng, rng.IntN(512))...))) {
			return
		}
	}
}

// hugeArrays sends valid headers whose body starts with (or soon has) an
// array length of about two billion.
func hugeArrays(ctx context.Context, c net.Conn, rng *rand.Rand, st *stats) {
	for i := int32(0); ctx.Err() == nil && i < 100; i++ {
		key, version := validKey(rng)
		body := header(key, version, i)
		for range rng.IntN(3) { // a few leading fields
			body = append(body, 0, 0)
		}
		if rng.IntN(2) == 0 {
			body = binary.BigEndian.AppendUint32(body, 0x7ffffff0) // classic array length
		} else {
			body = binary.AppendUvarint(body, 0xfffffff0) // compact array length
		}
		if !send(c, st, frame(append(body, randBytes(rng, 16)...))) {
			return
		}
	}
}

// slowWriter sends a valid Metadata request one byte at a time.
func slowWriter(ctx context.Context, c net.Conn, _ *rand.Rand, st *stats) {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(4)
	b := kmsg.NewRequestFormatter(kmsg.FormatterClientID("slow")).AppendRequest(nil, req, 1)
	st.frames.Add(1)
	for _, x := range b {
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := c.Write([]byte{x}); err != nil {
			return
		}
	}
}

// fetchFrame is a Fetch v11 of topic's partition 0 from offset 0, up to
// 1 MiB, answered at once.
func fetchFrame(topic string, corr int32) []byte {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(11)
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, 1<<20
	req.IsolationLevel, req.SessionEpoch = 0, -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic = topic
	p := kmsg.NewFetchRequestTopicPartition()
	p.PartitionMaxBytes, p.CurrentLeaderEpoch, p.LogStartOffset = 1<<20, -1, -1
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("hostile")).AppendRequest(nil, req, corr)
}

// pipelinedNeverRead pipelines 100 fetches and never reads an answer, then
// holds the connection until its life ends (issue 20: the proxy held up to
// 64 answers per such connection).
func pipelinedNeverRead(ctx context.Context, c net.Conn, cfg *Config, _ *rand.Rand, st *stats) {
	for i := int32(0); ctx.Err() == nil && i < 100; i++ {
		if !send(c, st, fetchFrame(cfg.FetchTopic, i)) {
			return
		}
	}
	<-ctx.Done()
}

// closedMidResponse asks for a fetch, reads the first bytes of the answer
// and closes.
func closedMidResponse(ctx context.Context, c net.Conn, cfg *Config, _ *rand.Rand, st *stats) {
	for i := int32(0); ctx.Err() == nil && i < 10; i++ {
		if !send(c, st, fetchFrame(cfg.FetchTopic, i)) {
			return
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = io.ReadFull(c, make([]byte, 64))
}

// halfSentFrame claims a 900 KiB frame, sends a third of it and stops
// (issue 20: such frames held the shared budget until the idle timeout).
func halfSentFrame(ctx context.Context, c net.Conn, rng *rand.Rand, st *stats) {
	if send(c, st, binary.BigEndian.AppendUint32(nil, 900<<10)) {
		send(c, st, randBytes(rng, 300<<10))
	}
	<-ctx.Done()
}
