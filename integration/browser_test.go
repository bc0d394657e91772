package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/assembly/devcluster"
	"github.com/kproxy/kproxy/assembly/devcluster/devtest"
)

// chromium finds a headless-capable Chromium: $KPROXY_CHROMIUM, or Debian's
// chromium on the PATH. Outside CI a missing browser skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KPROXY_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const how = "chromium not found: apt-get install chromium (scripts/install-clients.sh does in CI), or set KPROXY_CHROMIUM"
	if os.Getenv("CI") == "true" {
		t.Fatal(how)
	}
	t.Skip(how)
	return ""
}

// artifactDir is where browser tests leave screenshots: $KPROXY_ARTIFACTS,
// or kproxy-artifacts under the system temp dir, never the work tree.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("KPROXY_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "kproxy-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("artifact dir: %v", err)
	}
	return dir
}

// consoleErrors collects what the page logs as an error or throws, until
// its context ends.
type consoleErrors struct {
	mu   sync.Mutex
	errs []string
	done chan struct{}
}

func watchConsole(ctx context.Context) *consoleErrors {
	c := &consoleErrors{done: make(chan struct{})}
	messages := chromedp.Console(ctx) // subscribes now, before the page loads
	go func() {
		defer close(c.done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				c.mu.Lock()
				c.errs = append(c.errs, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line))
				c.mu.Unlock()
			}
		}
	}()
	return c
}

func (c *consoleErrors) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}

// TestRoutingPageInBrowser loads the admin page in headless Chromium against
// a dev cluster: it lists the brokers and partitions, shows a partition's new
// owner within 2s of the ownership moving in etcd, and logs no errors.
func TestRoutingPageInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser and a cluster")
	}
	exe := chromium(t)
	const topic, partitions = "ui", 6
	c := devtest.Start(t, devcluster.Config{Brokers: 3, AutoCreateTopics: true, DefaultPartitions: partitions, LeaseTTL: 2 * time.Second})
	// Brokers take partitions as they are used: write to each one.
	cl := newClient(t, c.ProxyAddrs()[0], kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for p := range int32(partitions) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("hello")}).FirstErr(); err != nil {
			t.Fatalf("produce to %s/%d: %v", topic, p, err)
		}
	}

	// No sandbox: Chromium refuses it as root and CI containers often lack
	// the namespaces it needs; the browser only loads the test's own page.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.WindowSize(1400, 1100),
		chromedp.NoSandbox)
	allocCtx, stopAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer stopAlloc()
	bctx, stopBrowser := chromedp.NewContext(allocCtx)
	defer stopBrowser()
	consoleCtx, stopConsole := context.WithCancel(bctx)
	console := watchConsole(consoleCtx)
	defer func() { stopConsole(); <-console.done }()

	base := "http://" + c.AdminAddrs()[0]
	rows := `#partitions tbody tr`
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(`#brokers tbody tr`),
		chromedp.SendKeys(`#part-topic`, topic),
	); err != nil {
		t.Fatalf("load the page: %v", err)
	}
	// The filter is applied after a short pause in typing; wait for the
	// topic's rows, each with an owner.
	// shoot saves a screenshot where test artifacts go, never in the tree.
	shoot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Errorf("screenshot: %v", err)
			return
		}
		path := filepath.Join(artifactDir(t), name)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Errorf("save screenshot: %v", err)
			return
		}
		t.Logf("screenshot: %s", path)
	}
	jsBool := func(expr string) bool {
		t.Helper()
		ok, err := chromedp.Run(bctx, chromedp.Evaluate[bool](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return ok
	}
	waitJS := func(what, expr string, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		for {
			if jsBool(expr) {
				return time.Since(start)
			}
			if time.Since(start) > within {
				shoot("routing-page-failed.png")
				t.Fatalf("page: %s not within %s (console errors: %q)", what, within, console.list())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitJS("6 owned partitions of "+topic, fmt.Sprintf(
		`[...document.querySelectorAll(%q)].filter(r => r.cells[0].textContent === %q && r.cells[2].textContent !== '–').length === %d`,
		rows, topic, partitions), 10*time.Second)
	if !jsBool(`document.querySelectorAll('#brokers tbody tr').length === 3`) {
		t.Fatal("the page does not list 3 brokers")
	}
	ownerCell := fmt.Sprintf(`document.querySelector('#partitions tbody tr[data-key=%q]').cells[2].textContent`, topic+"/0")
	old := mustOwner(t, c, topic, 0)
	shown, err := chromedp.Run(bctx, chromedp.Evaluate[string](ownerCell))
	if err != nil || shown != fmt.Sprint(old) {
		t.Fatalf("page shows owner %q for %s/0 (%v), etcd says %d", shown, topic, err, old)
	}

	// Move the partition: stop its owner gracefully and keep writing to it,
	// so that another broker takes it over, and time the page from when
	// etcd has the new owner.
	if err := c.StopBroker(old); err != nil {
		t.Logf("stop broker %d: %v", old, err)
	}
	writing, stopWriting := context.WithCancel(ctx)
	var writer sync.WaitGroup
	writer.Go(func() {
		for i := 0; i < 1000 && writing.Err() == nil; i++ { // bounded; stopWriting ends it first
			pctx, pcancel := context.WithTimeout(writing, time.Second)
			_ = cl.ProduceSync(pctx, &kgo.Record{Partition: 0, Value: []byte("after")}).FirstErr()
			pcancel()
		}
	})
	defer func() { stopWriting(); writer.Wait() }()
	var moved time.Time
	var next int32
	for deadline := time.Now().Add(20 * time.Second); ; {
		if o, ok, err := c.Owner(ctx, topic, 0); err == nil && ok && o != old {
			moved, next = time.Now(), o
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/0 did not move off broker %d within 20s", topic, old)
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitJS(fmt.Sprintf("owner of %s/0 shown as %d", topic, next), fmt.Sprintf(`%s === %q`, ownerCell, fmt.Sprint(next)), 2*time.Second-time.Since(moved))
	t.Logf("page showed the new owner %s after etcd had it", time.Since(moved).Round(time.Millisecond))
	waitJS("the change in the ownership list", fmt.Sprintf(
		`[...document.querySelectorAll('#changes li')].some(li => li.textContent.includes(%q))`, fmt.Sprintf("%s/0: %d → %d", topic, old, next)), 2*time.Second)
	waitJS("broker "+fmt.Sprint(old)+" shown as not live", fmt.Sprintf(
		`document.querySelector('#brokers tbody tr[data-broker="%d"]').cells[3].textContent === 'no'`, old), 5*time.Second)

	waitJS("request rates for Produce, and for a broker", `[...document.querySelectorAll('#rates-api tbody tr')].some(r => r.cells[0].textContent === 'Produce') &&
		document.querySelectorAll('#rates-broker tbody tr').length > 0`, 5*time.Second)
	shoot("routing-page.png")
	if errs := console.list(); len(errs) > 0 {
		t.Fatalf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
}
