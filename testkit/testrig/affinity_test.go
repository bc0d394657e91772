package testrig

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// allowed is the Cpus_allowed_list of every thread of pid.
func allowed(t *testing.T, pid int) []string {
	t.Helper()
	tids, err := threads(pid)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tid := range tids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
				out = append(out, strings.TrimSpace(v))
			}
		}
	}
	return out
}

func TestProcCPUs(t *testing.T) {
	all := AllCPUs()
	if len(all) < 2 {
		t.Skip("pinning needs 2 CPUs")
	}
	last := all[len(all)-1]
	p := NewProc(Spec{Name: "sleep", Path: "/bin/sleep", Args: []string{"60"}, CPUs: []int{last}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	want := fmt.Sprint(last)
	for _, got := range allowed(t, p.Pid()) {
		if got != want {
			t.Fatalf("after start: a thread may run on %q, want %q", got, want)
		}
	}
	if err := p.SetCPUs([]int{all[0]}); err != nil {
		t.Fatal(err)
	}
	want = fmt.Sprint(all[0])
	for _, got := range allowed(t, p.Pid()) {
		if got != want {
			t.Fatalf("after SetCPUs: a thread may run on %q, want %q", got, want)
		}
	}
	if err := p.SetCPUs(nil); err != nil {
		t.Fatal(err)
	}
	for _, got := range allowed(t, p.Pid()) {
		if got == want {
			t.Fatalf("after SetCPUs(nil): still pinned to %q", got)
		}
	}
}
