package kafscale

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// clientKit drives one client: produce returns once every value is
// acknowledged (or with the error the client reported); consume returns
// the values read once it has n.
type clientKit struct {
	name        string
	unavailable func() string // why the client cannot run here ("" if it can)
	produce     func(ctx context.Context, addr, topic string, values []string) error
	consume     func(ctx context.Context, addr, topic string, n int) ([]string, error)
}

// require skips the test when the client cannot run here, or fails it
// under CI=true (CI installs every client).
func (c clientKit) require(t *testing.T) {
	t.Helper()
	if why := c.unavailable(); why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
}

// values are n distinct record values naming the client.
func (c clientKit) values(n int) []string {
	values := make([]string, n)
	for i := range values {
		values[i] = fmt.Sprintf("%s-%d", c.name, i)
	}
	return values
}

// checkRead fails the test for every value of want missing from got.
func (c clientKit) checkRead(t *testing.T, want, got []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, v := range got {
		seen[v] = true
	}
	for _, v := range want {
		if !seen[v] {
			t.Errorf("%s: acknowledged %q not read back", c.name, v)
		}
	}
}

// TestClientsThroughLeaseMove: each client produces half its records,
// the broker holding most leases is scaled down, it produces the rest and
// reads everything back: no client-visible error, nothing lost.
func TestClientsThroughLeaseMove(t *testing.T) {
	for _, c := range []clientKit{saramaKit(), kcatKit(), kafkajsKit()} {
		t.Run(c.name, func(t *testing.T) {
			c.require(t)
			topic := "orders-" + c.name
			e := newEnv(t, map[string]int32{topic: partitions})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			const n = 200
			values := c.values(n)
			if err := c.produce(ctx, e.srv.Addr(), topic, values[:n/2]); err != nil {
				t.Fatalf("first half: %v", err)
			}
			x, held := e.busiest(ctx, topic)
			sentAtExit := e.scaleDown(ctx, x, held > 0)
			if err := c.produce(ctx, e.srv.Addr(), topic, values[n/2:]); err != nil {
				t.Fatalf("second half, after broker %d (%d leases) left: %v", x, held, err)
			}
			got, err := c.consume(ctx, e.srv.Addr(), topic, n)
			if err != nil {
				t.Fatalf("consume: %v", err)
			}
			c.checkRead(t, values, got)
			e.checkServed(topic, x, sentAtExit)
		})
	}
}

func saramaKit() clientKit {
	config := func() *sarama.Config {
		cfg := sarama.NewConfig()
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Return.Successes = true
		cfg.Producer.Retry.Max = 10
		cfg.Consumer.Return.Errors = true
		cfg.Metadata.RefreshFrequency = time.Second
		return cfg
	}
	return clientKit{
		name:        "sarama",
		unavailable: func() string { return "" },
		produce: func(_ context.Context, addr, topic string, values []string) error {
			p, err := sarama.NewSyncProducer([]string{addr}, config())
			if err != nil {
				return fmt.Errorf("sarama producer: %w", err)
			}
			defer p.Close()
			for i, v := range values {
				msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprint(i)), Value: sarama.StringEncoder(v)}
				if _, _, err := p.SendMessage(msg); err != nil {
					return fmt.Errorf("send %q: %w", v, err)
				}
			}
			return nil
		},
		consume: func(ctx context.Context, addr, topic string, n int) ([]string, error) {
			c, err := sarama.NewConsumer([]string{addr}, config())
			if err != nil {
				return nil, fmt.Errorf("sarama consumer: %w", err)
			}
			defer c.Close()
			out := make(chan string)
			errs := make(chan error, partitions)
			for p := range int32(partitions) {
				pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
				if err != nil {
					return nil, fmt.Errorf("consume %s/%d: %w", topic, p, err)
				}
				defer pc.AsyncClose()
				go func() {
					for {
						select {
						case m, ok := <-pc.Messages():
							if !ok {
								return
							}
							select {
							case out <- string(m.Value):
							case <-ctx.Done():
								return
							}
						case err, ok := <-pc.Errors():
							if ok {
								errs <- err
							}
							return
						}
					}
				}()
			}
			var got []string
			for len(got) < n {
				select {
				case v := <-out:
					got = append(got, v)
				case err := <-errs:
					return got, fmt.Errorf("consumer error: %w", err)
				case <-ctx.Done():
					return got, fmt.Errorf("read %d of %d: %w", len(got), n, ctx.Err())
				}
			}
			return got, nil
		},
	}
}

func kcatKit() clientKit {
	return clientKit{
		name: "kcat",
		unavailable: func() string {
			if _, err := exec.LookPath("kcat"); err != nil {
				return "kcat is not on PATH: run scripts/install-clients.sh (apt-get install kcat)"
			}
			return ""
		},
		produce: func(ctx context.Context, addr, topic string, values []string) error {
			var in strings.Builder
			for i, v := range values {
				fmt.Fprintf(&in, "%d:%s\n", i, v)
			}
			// kcat exits non-zero if any delivery report failed.
			_, err := run(ctx, in.String(), "kcat", "-P", "-b", addr, "-t", topic, "-K", ":", "-X", "acks=all")
			return err
		},
		consume: func(ctx context.Context, addr, topic string, n int) ([]string, error) {
			// -e: exit once every partition is read to its end.
			out, err := run(ctx, "", "kcat", "-C", "-b", addr, "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n")
			if err != nil {
				return nil, err
			}
			got := strings.Fields(out)
			if len(got) < n {
				return got, fmt.Errorf("kcat read %d records, want %d", len(got), n)
			}
			return got, nil
		},
	}
}

// compatJS is kafkajs's driver script, shared with integration/compat.
var compatJS = filepath.Join("..", "compat", "node", "compat.js")

func kafkajsKit() clientKit {
	return clientKit{
		name: "kafkajs",
		unavailable: func() string {
			if _, err := exec.LookPath("node"); err != nil {
				return "node is not on PATH: install Node.js 18+ and run scripts/install-clients.sh"
			}
			if _, err := os.Stat(filepath.Join("..", "compat", "node", "node_modules", "kafkajs")); err != nil {
				return "kafkajs is not installed: run scripts/install-clients.sh (npm ci in integration/compat/node)"
			}
			return ""
		},
		produce: func(ctx context.Context, addr, topic string, values []string) error {
			var in strings.Builder
			for i, v := range values {
				fmt.Fprintf(&in, "%d\t%s\n", i, v)
			}
			out, err := run(ctx, in.String(), "node", compatJS, "produce", "--bootstrap", addr, "--topic", topic)
			if err != nil {
				return err
			}
			if !strings.Contains(out, `"done":true`) {
				return fmt.Errorf("kafkajs producer did not finish: %s", out)
			}
			return nil
		},
		consume: func(ctx context.Context, addr, topic string, n int) ([]string, error) {
			return kafkajsConsume(ctx, addr, topic, n)
		},
	}
}

// kafkajsConsume runs a kafkajs group member until it has printed n
// records, then stops it with SIGTERM (it leaves the group).
func kafkajsConsume(ctx context.Context, addr, topic string, n int) ([]string, error) {
	cmd := exec.CommandContext(ctx, "node", compatJS, "consume", "--bootstrap", addr, "--topic", topic, "--group", "kafkajs-"+topic)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start kafkajs consumer: %w", err)
	}
	var got []string
	var failure error
	sc := bufio.NewScanner(stdout)
	for len(got) < n && sc.Scan() {
		var line struct {
			V     *string `json:"v"`
			Crash string  `json:"crash"`
			Error string  `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		switch {
		case line.Crash != "" || line.Error != "":
			failure = fmt.Errorf("kafkajs consumer: crash %q error %q", line.Crash, line.Error)
		case line.V != nil:
			got = append(got, *line.V)
		}
		if failure != nil {
			break
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	werr := cmd.Wait()
	switch {
	case failure != nil:
		return got, fmt.Errorf("%w; stderr: %s", failure, stderr.String())
	case len(got) < n:
		return got, fmt.Errorf("kafkajs read %d of %d records (exit %v); stderr: %s", len(got), n, werr, stderr.String())
	}
	return got, nil
}

// run runs a client to completion with stdin; a non-zero exit is an error
// carrying its stderr.
func run(ctx context.Context, stdin, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w; stderr: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}
