// Package workload drives a Kafka-protocol cluster the way the fault suite
// needs it: kgo producers (acks=all, idempotent or plain) sending values that
// are unique in the run to chosen partitions, consumers reading every
// partition from the start, and a final read of every partition through each
// proxy. Everything is logged as operations in a history.Recorder.
//
// The promise: each send is logged as invoked before kgo sees it and gets
// exactly one outcome (ok with partition and offset; fail only when the
// broker definitely did not write it; info otherwise, also for sends still
// outstanding when the run stops). Every client the package creates is
// closed by Drain or Stop, and every wait is bounded.
package workload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kproxy/kproxy/integration/chaos/history"
)

// Mode chooses which producers are idempotent.
type Mode string

const (
	Idempotent Mode = "idempotent"
	Plain      Mode = "plain"
	Mixed      Mode = "mixed" // alternate: even producers idempotent
)

// Config describes a workload. Zero values take the defaults in brackets.
type Config struct {
	Proxies []string // Kafka addresses; clients are spread over them (required)
	// Zones, if set, is each proxy's zone: a consumer of proxy i sets
	// client.rack Zones[i], so its fetches go to brokers of that zone.
	Zones      []string
	Topic      string  // [kchaos]
	Partitions int32   // [8]
	Producers  int     // [12]
	Mode       Mode    // [Mixed]
	Rate       float64 // sends per second per producer [20]
	// MaxInflight bounds each producer's outstanding sends [8].
	MaxInflight int
	// Consumers per proxy [1].
	Consumers       int
	RequestTimeout  time.Duration // produce request timeout [5s]
	DeliveryTimeout time.Duration // record delivery timeout [20s]
	Seed            uint64
	Recorder        *history.Recorder // required
	Logger          *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if len(c.Proxies) == 0 || c.Recorder == nil {
		return c, errors.New("workload config: Proxies and Recorder are required")
	}
	if c.Topic == "" {
		c.Topic = "kchaos"
	}
	if c.Partitions == 0 {
		c.Partitions = 8
	}
	if c.Producers == 0 {
		c.Producers = 12
	}
	if c.Mode == "" {
		c.Mode = Mixed
	}
	if c.Rate == 0 {
		c.Rate = 20
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = 8
	}
	if c.Consumers == 0 {
		c.Consumers = 1
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 5 * time.Second
	}
	if c.DeliveryTimeout == 0 {
		c.DeliveryTimeout = 20 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Workload is running producers and consumers.
type Workload struct {
	cfg         Config
	producers   []*producer
	consumers   []*consumer
	stopSend    context.CancelFunc
	stopConsume context.CancelFunc
	sending     sync.WaitGroup
	consuming   sync.WaitGroup
	drainOnce   sync.Once
	stopOnce    sync.Once
}

// Start creates the clients and starts sending and consuming.
func Start(cfg Config) (*Workload, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	w := &Workload{cfg: cfg}
	for i := range cfg.Producers {
		idem := cfg.Mode == Idempotent || (cfg.Mode == Mixed && i%2 == 0)
		p, err := newProducer(cfg, i, cfg.Proxies[i%len(cfg.Proxies)], idem)
		if err != nil {
			w.closeAll()
			return nil, err
		}
		w.producers = append(w.producers, p)
	}
	for i := range cfg.Consumers * len(cfg.Proxies) {
		rack := ""
		if len(cfg.Zones) > 0 {
			rack = cfg.Zones[i%len(cfg.Proxies)]
		}
		c, err := newConsumer(cfg, i, cfg.Proxies[i%len(cfg.Proxies)], rack)
		if err != nil {
			w.closeAll()
			return nil, err
		}
		w.consumers = append(w.consumers, c)
	}
	sendCtx, stopSend := context.WithCancel(context.Background())
	consumeCtx, stopConsume := context.WithCancel(context.Background())
	w.stopSend, w.stopConsume = stopSend, stopConsume
	for _, p := range w.producers {
		w.sending.Add(1)
		go func() { defer w.sending.Done(); p.run(sendCtx) }()
	}
	for _, c := range w.consumers {
		w.consuming.Add(1)
		go func() { defer w.consuming.Done(); c.run(consumeCtx) }()
	}
	cfg.Logger.Info("workload started", "producers", len(w.producers), "consumers", len(w.consumers), "mode", cfg.Mode)
	return w, nil
}

func (w *Workload) closeAll() {
	for _, p := range w.producers {
		p.cl.Close()
	}
	for _, c := range w.consumers {
		c.cl.Close()
	}
}

// Drain stops new sends, waits until every started send has an outcome or
// ctx ends, and closes the producers (whatever is still outstanding then is
// logged as info).
func (w *Workload) Drain(ctx context.Context) {
	w.drainOnce.Do(func() {
		w.stopSend()
		w.sending.Wait()
		var wg sync.WaitGroup
		for _, p := range w.producers {
			wg.Add(1)
			go func() { defer wg.Done(); p.drain(ctx) }()
		}
		wg.Wait()
	})
}

// Stop drains with a 30s bound and stops the consumers.
func (w *Workload) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w.Drain(ctx)
	w.stopOnce.Do(func() {
		w.stopConsume()
		w.consuming.Wait()
	})
}

// Topic is the topic the workload writes.
func (w *Workload) Topic() string { return w.cfg.Topic }

func (w *Workload) String() string {
	return fmt.Sprintf("%d producers (%s) and %d consumers over %v", len(w.producers), w.cfg.Mode, len(w.consumers), w.cfg.Proxies)
}
