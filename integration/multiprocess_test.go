package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/internal/devcluster"
	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/adminapi"
)

// process is one kproxy subprocess that the test can kill and restart.
type process struct {
	t    *testing.T
	args []string
	cmd  *exec.Cmd
}

func (p *process) start() {
	p.t.Helper()
	p.cmd = exec.Command(p.args[0], p.args[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = os.Stderr, os.Stderr
	if os.Getenv("KPROXY_TEST_LOG") == "" {
		p.cmd.Stdout, p.cmd.Stderr = nil, nil
	}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("start %v: %v", p.args, err)
	}
}

// kill sends SIGKILL and reaps the process.
func (p *process) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.cmd.Wait()
	p.cmd = nil
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func buildKproxy(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kproxy")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../cmd/kproxy").CombinedOutput()
	if err != nil {
		t.Fatalf("go build kproxy: %v\n%s", err, out)
	}
	return bin
}

// TestSeparateProcesses runs brokers and the proxy as their own processes
// against an etcd they do not embed, and kills and restarts them one by one
// while a client keeps producing: every acknowledged record stays readable.
func TestSeparateProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and waits out a lease TTL")
	}
	bin := buildKproxy(t)
	etcd, _ := etcdtest.Start(t)
	storeDir := t.TempDir()

	procs := map[string]*process{}
	t.Cleanup(func() {
		for _, p := range procs {
			p.kill()
		}
	})
	brokerAddr := map[int32]string{}
	for id := int32(1); id <= 3; id++ {
		brokerAddr[id] = freePort(t)
		p := &process{t: t, args: []string{bin, "broker", "--id", fmt.Sprint(id), "--listen", brokerAddr[id],
			"--etcd-endpoints", etcd.Endpoint, "--store", storeDir, "--lease-ttl", "2s"}}
		procs[fmt.Sprint("broker", id)] = p
		p.start()
	}
	proxyAddr, adminAddr := freePort(t), freePort(t)
	proxyProc := &process{t: t, args: []string{bin, "serve", "--listen", proxyAddr, "--admin", adminAddr, "--etcd-endpoints", etcd.Endpoint}}
	procs["proxy"] = proxyProc
	proxyProc.start()
	waitReady(t, adminAddr, 3)

	const topic = "procs"
	cl := newClient(t, proxyAddr, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	var produced []record
	produce := func(n int, tag string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for i := 0; i < n; i++ {
			r, err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 5)), Value: []byte(fmt.Sprintf("%s-%d", tag, i))}).First()
			if err != nil {
				t.Fatalf("produce %s-%d: %v", tag, i, err)
			}
			produced = append(produced, record{r.Partition, r.Offset, string(r.Value)})
		}
	}

	produce(50, "before")
	victim := ownerOf(t, etcd.Endpoint, topic, produced[0].partition)
	procs[fmt.Sprint("broker", victim)].kill()
	produce(50, "after-kill") // waits out the victim's lease through the client's retries
	procs[fmt.Sprint("broker", victim)].start()
	proxyProc.kill()
	proxyProc.start()
	waitReady(t, adminAddr, 3)
	produce(50, "after-restarts")

	checkSame(t, produced, consumeAll(t, proxyAddr, topic, len(produced), 60*time.Second))
}

func waitReady(t *testing.T, adminAddr string, brokers int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := adminapi.WaitReady(ctx, adminAddr, brokers); err != nil {
		t.Fatal(err)
	}
}

func ownerOf(t *testing.T, endpoint, topic string, p int32) int32 {
	t.Helper()
	cli := etcdtest.NewClient(t, endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	owner, ok, err := devcluster.ReadOwner(ctx, cli, layout.New(""), topic, p)
	if err != nil || !ok {
		t.Fatalf("owner of %s/%d: ok=%v err=%v", topic, p, ok, err)
	}
	return owner
}
