package compat

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// report is the one piece of package state: the parallel client tests fill
// it and TestMain, the only code that runs after them all, renders it.
var report = newResults()

// docPath is docs/compatibility.md, relative to this package's directory
// (where go test runs the binary).
var docPath = filepath.Join("..", "..", "docs", "compatibility.md")

// clientTimeout bounds one client's whole run (every capability).
const clientTimeout = 8 * time.Minute

func TestMain(m *testing.M) {
	flag.Parse()
	// Clients wait on the network, not on CPU: run all six at once even
	// where GOMAXPROCS is 2, unless the caller chose -parallel.
	if !flagSet("test.parallel") {
		_ = flag.Set("test.parallel", "8")
	}
	// KPROXY_COMPAT_SARAMA_LOG=1: sarama's package logger (its only one) to
	// stderr, to see the errors behind its retries.
	if os.Getenv("KPROXY_COMPAT_SARAMA_LOG") != "" {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Lmicroseconds)
	}
	code := m.Run()
	if shouldWriteDoc() && !report.empty() {
		if err := report.writeFile(docPath); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		} else {
			fmt.Fprintf(os.Stderr, "compat: wrote %s\n", docPath)
		}
	}
	os.Exit(code)
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// shouldWriteDoc: the doc is written only when asked (KPROXY_WRITE_DOCS=1,
// which `make docs` sets), so that `make test` leaves the tree as it was; and
// even then a partial run (-run) or a run against the kfake baseline must not
// overwrite the full matrix.
func shouldWriteDoc() bool {
	switch os.Getenv("KPROXY_WRITE_DOCS") {
	case "1", "true":
	default:
		return false
	}
	if tg := os.Getenv("KPROXY_COMPAT_TARGET"); tg != "" && tg != defaultTarget {
		fmt.Fprintf(os.Stderr, "compat: not writing %s: target %s is not %s\n", docPath, tg, defaultTarget)
		return false
	}
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() != "" {
		fmt.Fprintf(os.Stderr, "compat: not writing %s: partial run (-run %s)\n", docPath, f.Value)
		return false
	}
	return true
}

func drivers() []driver {
	return []driver{kgoDriver{}, saramaDriver{}, kafkaGoDriver{}, confluentDriver{}, kcatDriver{}, kafkajsDriver{}}
}

// TestCompat runs every capability for every client, each client against
// its own cluster so that one client's failover (a killed broker) or a
// proxy fault it triggers cannot disturb another client's checks.
func TestCompat(t *testing.T) {
	if testing.Short() {
		t.Skip("the client matrix runs every client for minutes (make quick skips it; make test runs it)")
	}
	kind, err := chooseTarget()
	if err != nil {
		t.Fatal(err)
	}
	report.setTarget(kind.describe)
	for _, d := range drivers() {
		t.Run(strings.ReplaceAll(d.name(), " ", "_"), func(t *testing.T) {
			t.Parallel()
			runClient(t, kind, d)
		})
	}
}

func runClient(t *testing.T, kind targetKind, d driver) {
	report.setClient(d.name(), d.version(), d.notes())
	caps := clientCapabilities(d)
	if why := d.unavailable(); why != "" {
		for _, c := range caps {
			runCap(t, d, c.name, func(*testing.T) (string, error) { return "", missingClient{why} })
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
	defer cancel()
	logs := &tailBuffer{}
	// The client's cluster starts with the first capability that uses it,
	// so that running one column (-run) that brings its own cluster (narrow
	// brokers) starts no other.
	var (
		tg       target
		startErr error
	)
	defer func() {
		if tg != nil {
			tg.close()
		}
		if t.Failed() && logs.String() != "" {
			t.Logf("%s log (warnings and worse, last 64 KiB):\n%s", kind.name, logs)
		}
	}()
	h := &harness{ctx: ctx, d: d, kind: kind}
	for _, c := range caps {
		runCap(t, d, c.name, func(t *testing.T) (string, error) {
			if tg == nil && startErr == nil && !c.ownCluster {
				if tg, startErr = kind.start(ctx, logs); startErr == nil {
					h.tg = tg
				}
			}
			if startErr != nil && !c.ownCluster {
				return "", fmt.Errorf("start %s: %w", kind.name, startErr)
			}
			return c.run(h, t)
		})
	}
}

// missingClient is a client that is not installed on this machine.
type missingClient struct{ how string }

func (m missingClient) Error() string { return "client not installed: " + m.how }

// runCap runs one capability as a subtest and records its cell.
func runCap(t *testing.T, d driver, name string, fn func(t *testing.T) (string, error)) {
	t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
		res := cell{status: statusFail, note: "test aborted"}
		defer func() { report.set(d.name(), name, res) }()
		start := time.Now()
		note, err := fn(t)
		t.Logf("%s / %s: %v (%s)", d.name(), name, err, time.Since(start).Round(time.Millisecond))
		var missing missingClient
		switch {
		case errors.As(err, &missing) && ciMode():
			res = cell{status: statusFail, note: err.Error()}
			t.Fatalf("CI=true: %v", err)
		case errors.As(err, &missing):
			res = cell{status: statusSkip, note: err.Error()}
			t.Skip(err)
		case errors.Is(err, errNotSupported):
			res = cell{status: statusNA, note: note}
			t.Skip(err)
		case err != nil:
			res = cell{status: statusFail, note: err.Error()}
			t.Fatal(err)
		default:
			res = cell{status: statusPass, note: note}
		}
	})
}
