package harness

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// profileKinds sort a CPU profile's functions into what a relay (which
// decodes nothing) also pays and what only the proxy does, first match wins.
var profileKinds = []struct {
	kind     string
	prefixes []string
}{
	{"syscalls and the network poller (a relay pays these too)", []string{"syscall.", "internal/runtime/syscall", "runtime/internal/syscall", "internal/poll.", "runtime.netpoll", "runtime.epoll", "net."}},
	{"garbage collection and allocation", []string{"runtime.mallocgc", "runtime.gc", "runtime.scanobject", "runtime.markroot", "runtime.greyobject", "runtime.findObject", "runtime.heapBits", "runtime.memclrNoHeapPointers", "runtime.(*mspan)", "runtime.(*mheap)", "runtime.(*mcache)", "runtime.(*gcWork)", "runtime.sweepone", "runtime.wbBuf", "runtime.bulkBarrier", "runtime.typePointers", "runtime.scanblock", "runtime.(*mcentral)", "runtime.nextFreeFast", "runtime.makeslice", "runtime.newobject", "runtime.growslice"}},
	{"scheduler, locks and goroutine switches", []string{"runtime.futex", "runtime.schedule", "runtime.findRunnable", "runtime.park_m", "runtime.gopark", "runtime.ready", "runtime.usleep", "runtime.mcall", "runtime.goready", "runtime.runqgrab", "runtime.stealWork", "runtime.notesleep", "runtime.notewakeup", "runtime.lock", "runtime.unlock", "runtime.selectgo", "runtime.chan", "runtime.send", "runtime.recv", "runtime.procyield", "runtime.osyield", "runtime.nanotime", "runtime.casgstatus", "runtime.execute", "runtime.gogo", "runtime.wakep", "runtime.resetspinning", "sync."}},
	{"memory copies", []string{"runtime.memmove"}},
	{"CRC checksums", []string{"hash/crc32"}},
	{"Kafka protocol decode and encode (franz-go)", []string{"github.com/twmb/franz-go"}},
	{"proxy code (kproxy packages)", []string{"github.com/kproxy/kproxy"}},
	{"other runtime", []string{"runtime."}},
}

// profileShares is the profile's flat CPU by kind, largest first, e.g.
// "syscalls ... 45%; garbage collection ... 20%".
func profileShares(ctx context.Context, repo, bin, path string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=2000", bin, path)
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go tool pprof: %w", err)
	}
	return sharesOf(string(out)), nil
}

// sharesOf reads `pprof -top` rows ("flat flat% sum% cum cum% name").
func sharesOf(top string) string {
	share := map[string]float64{}
	for _, line := range strings.Split(top, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasSuffix(f[1], "%") {
			continue
		}
		pct, err := strconv.ParseFloat(strings.TrimSuffix(f[1], "%"), 64)
		if err != nil {
			continue
		}
		share[kindOf(strings.Join(f[5:], " "))] += pct
	}
	kinds := make([]string, 0, len(share))
	for k, v := range share {
		if v >= 0.5 { // a kind that rounds to 0% says nothing
			kinds = append(kinds, k)
		}
	}
	slices.SortFunc(kinds, func(a, b string) int {
		if share[a] != share[b] {
			if share[a] > share[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %.0f%%", k, share[k])
	}
	return strings.Join(parts, "; ")
}

func kindOf(fn string) string {
	for _, k := range profileKinds {
		for _, p := range k.prefixes {
			if strings.HasPrefix(fn, p) {
				return k.kind
			}
		}
	}
	return "other"
}
