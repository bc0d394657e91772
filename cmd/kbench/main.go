// Command kbench is kproxy's load generator (package bench/load on the
// command line): produce, consume and end-to-end runs print one JSON result
// line on stdout and a summary on stderr. It also holds idle connections
// (conns) and runs plain TCP relays (relay) for the benchmark harness.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kproxy/kproxy/bench/load"
	"github.com/kproxy/kproxy/internal/commalist"
	"github.com/kproxy/kproxy/internal/testtools/faultnet"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	app := &cli.App{
		Name:  "kbench",
		Usage: "Kafka load generator and benchmark helpers for kproxy",
		Commands: []*cli.Command{
			produceCommand(), consumeCommand(), e2eCommand(), connsCommand(), relayCommand(),
		},
	}
	if err := app.RunContext(ctx, os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "kbench:", err)
		os.Exit(1)
	}
}

func targetFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "seeds", Value: "127.0.0.1:9092", Usage: "comma-separated bootstrap addresses"},
		&cli.StringFlag{Name: "dial-map", Usage: "comma-separated from=to address rewrites applied to every dial (relay side)"},
		&cli.StringFlag{Name: "topic", Value: "kbench", Usage: "topic"},
		&cli.StringFlag{Name: "out", Usage: "write the JSON result to this file instead of stdout"},
	}
}

func target(c *cli.Context) (load.Target, error) {
	t := load.Target{Seeds: commalist.Split(c.String("seeds"))}
	for _, pair := range commalist.Split(c.String("dial-map")) {
		from, to, ok := strings.Cut(pair, "=")
		if !ok {
			return t, fmt.Errorf("--dial-map entry %q: want from=to", pair)
		}
		if t.DialMap == nil {
			t.DialMap = make(map[string]string)
		}
		t.DialMap[from] = to
	}
	if len(t.Seeds) == 0 {
		return t, fmt.Errorf("--seeds is empty")
	}
	return t, nil
}

func runFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "record-size", Value: 1024, Usage: "value bytes per record"},
		&cli.StringFlag{Name: "partitions", Usage: "comma-separated partitions to write (default: all, kgo's default partitioner)"},
		&cli.Float64Flag{Name: "rate", Usage: "total records/s (0: as fast as possible)"},
		&cli.DurationFlag{Name: "warmup", Value: 2 * time.Second, Usage: "unmeasured start"},
		&cli.DurationFlag{Name: "duration", Value: 10 * time.Second, Usage: "measured window"},
	}
}

func produceCommand() *cli.Command {
	return &cli.Command{
		Name:  "produce",
		Usage: "produce as fast as possible or at a rate; report records/s, MB/s and send-to-ack latency",
		Flags: append(append(targetFlags(), runFlags()...),
			&cli.IntFlag{Name: "producers", Value: 8, Usage: "producing goroutines"},
			&cli.IntFlag{Name: "clients", Usage: "kgo clients (connections); 0 means one per producer"},
			&cli.StringFlag{Name: "acks", Value: "all", Usage: "all, leader or none"},
			&cli.DurationFlag{Name: "linger", Value: -1, Usage: "kgo ProducerLinger (negative: kgo default)"},
			&cli.IntFlag{Name: "max-buffered", Usage: "kgo MaxBufferedRecords per client (0: kgo default)"},
			&cli.IntFlag{Name: "create", Usage: "create the topic with this many partitions first (0: do not)"},
			&cli.StringFlag{Name: "compression", Value: "none", Usage: "batch codec: none, gzip, snappy, lz4 or zstd"},
		),
		Action: func(c *cli.Context) error {
			t, err := target(c)
			if err != nil {
				return err
			}
			parts, err := parsePartitions(c.String("partitions"))
			if err != nil {
				return err
			}
			if n := c.Int("create"); n > 0 {
				if err := load.EnsureTopic(c.Context, t, c.String("topic"), int32(n), logger()); err != nil {
					return err
				}
			}
			res, err := load.Produce(c.Context, load.ProduceConfig{
				Target: t, Topic: c.String("topic"), RecordSize: c.Int("record-size"), Partitions: parts,
				Producers: c.Int("producers"), Clients: c.Int("clients"), Acks: c.String("acks"),
				Rate: c.Float64("rate"), Warmup: c.Duration("warmup"), Duration: c.Duration("duration"),
				Linger: c.Duration("linger"), MaxBuffered: c.Int("max-buffered"), Compression: c.String("compression"),
				Logger: logger(),
			})
			if err != nil {
				return err
			}
			return report(c, res)
		},
	}
}

func consumeCommand() *cli.Command {
	return &cli.Command{
		Name:  "consume",
		Usage: "read a topic from offset 0 to its current end; report records/s, MB/s and fetch round trips",
		Flags: append(targetFlags(),
			&cli.IntFlag{Name: "consumers", Value: 4, Usage: "kgo clients; partitions dealt out round-robin"},
			&cli.DurationFlag{Name: "duration", Value: 10 * time.Second, Usage: "upper bound of the run"},
		),
		Action: func(c *cli.Context) error {
			t, err := target(c)
			if err != nil {
				return err
			}
			res, err := load.Consume(c.Context, load.ConsumeConfig{
				Target: t, Topic: c.String("topic"), Consumers: c.Int("consumers"),
				Duration: c.Duration("duration"), Logger: logger(),
			})
			if err != nil {
				return err
			}
			return report(c, res)
		},
	}
}

func e2eCommand() *cli.Command {
	return &cli.Command{
		Name:  "e2e",
		Usage: "produce stamped records at a rate while one consumer reads every partition; report send-to-receipt latency",
		Flags: append(append(targetFlags(), runFlags()...),
			&cli.DurationFlag{Name: "grace", Value: 10 * time.Second, Usage: "wait for late records after the window"},
		),
		Action: func(c *cli.Context) error {
			t, err := target(c)
			if err != nil {
				return err
			}
			parts, err := parsePartitions(c.String("partitions"))
			if err != nil {
				return err
			}
			res, err := load.E2E(c.Context, load.E2EConfig{
				Target: t, Topic: c.String("topic"), RecordSize: c.Int("record-size"), Partitions: parts,
				Rate: c.Float64("rate"), Warmup: c.Duration("warmup"), Duration: c.Duration("duration"),
				Grace: c.Duration("grace"), Logger: logger(),
			})
			if err != nil {
				return err
			}
			return report(c, res)
		},
	}
}

func connsCommand() *cli.Command {
	return &cli.Command{
		Name:  "conns",
		Usage: "open idle client connections (ApiVersions + Metadata each), print a JSON line, hold them",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:9092", Usage: "address to connect to"},
			&cli.IntFlag{Name: "n", Value: 1000, Usage: "connections"},
			&cli.IntFlag{Name: "parallel", Value: 64, Usage: "connections opened at a time"},
			&cli.BoolFlag{Name: "exit-on-stdin-eof", Usage: "stop when stdin closes (for a parent process)"},
		},
		Action: func(c *cli.Context) error {
			idle, err := load.OpenIdle(c.Context, c.String("addr"), c.Int("n"), c.Int("parallel"))
			if err != nil {
				return err
			}
			defer idle.Close()
			if err := writeJSON(os.Stdout, load.Result{Kind: "conns", Conns: idle.Len()}); err != nil {
				return err
			}
			hold(c.Context, c.Bool("exit-on-stdin-eof"))
			return nil
		},
	}
}

func relayCommand() *cli.Command {
	return &cli.Command{
		Name:  "relay",
		Usage: "run plain TCP relays (internal/testtools/faultnet, no faults) that decode nothing",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "pair", Usage: "listen=target, repeatable"},
			&cli.BoolFlag{Name: "exit-on-stdin-eof", Usage: "stop when stdin closes (for a parent process)"},
			&cli.BoolFlag{Name: "user-space-copy", Usage: "copy every byte through the relay's own buffer instead of splicing (the least any intermediary that reads the bytes pays)"},
		},
		Action: func(c *cli.Context) error {
			var opts []faultnet.Option
			if c.Bool("user-space-copy") {
				opts = append(opts, faultnet.UserSpaceCopy())
			}
			type relayAddr struct {
				Listen string `json:"listen"`
				Target string `json:"target"`
			}
			var addrs []relayAddr
			for _, pair := range c.StringSlice("pair") {
				listen, tgt, ok := strings.Cut(pair, "=")
				if !ok {
					return fmt.Errorf("--pair %q: want listen=target", pair)
				}
				r, err := faultnet.NewRelay(listen, tgt, logger(), opts...)
				if err != nil {
					return err
				}
				defer r.Close()
				addrs = append(addrs, relayAddr{Listen: r.Addr(), Target: tgt})
			}
			if len(addrs) == 0 {
				return fmt.Errorf("no --pair given")
			}
			if err := writeJSON(os.Stdout, map[string]any{"relays": addrs}); err != nil {
				return err
			}
			hold(c.Context, c.Bool("exit-on-stdin-eof"))
			return nil
		},
	}
}

// hold waits for ctx, or for stdin to close when stdinEOF is set.
func hold(ctx context.Context, stdinEOF bool) {
	eof := make(chan struct{})
	if stdinEOF {
		go func() { // ends with the process; stdin has no other reader
			io.Copy(io.Discard, os.Stdin)
			close(eof)
		}()
	}
	select {
	case <-ctx.Done():
	case <-eof:
	}
}

func report(c *cli.Context, res load.Result) error {
	fmt.Fprintf(os.Stderr, "%s: %d records in %.1fs: %.0f records/s, %.2f MB/s; latency p50 %dus p99 %dus p99.9 %dus max %dus; errors %d %s\n",
		res.Kind, res.Records, res.Seconds, res.RecordsPerSec, res.MBPerSec,
		res.Latency.P50, res.Latency.P99, res.Latency.P999, res.Latency.Max, res.Errors, res.FirstError)
	if path := c.String("out"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("create %s: %w", path, err)
		}
		defer f.Close()
		return writeJSON(f, res)
	}
	return writeJSON(os.Stdout, res)
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func parsePartitions(s string) ([]int32, error) {
	var out []int32
	for _, f := range commalist.Split(s) {
		p, err := strconv.ParseInt(f, 10, 32)
		if err != nil || p < 0 {
			return nil, fmt.Errorf("--partitions entry %q: want a partition number", f)
		}
		out = append(out, int32(p))
	}
	return out, nil
}
