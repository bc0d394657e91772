package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/testkit/progress"
)

func TestProgressPhases(t *testing.T) {
	now := time.Unix(0, 0)
	var out strings.Builder
	r := &runner{opt: Options{Name: "chaos", Duration: 5 * time.Minute, LeaseTTL: 3 * time.Second,
		Progress: progress.New(&out, "chaos", 10*time.Second, func() time.Time { return now })}}
	r.at("start cluster", 0, 0)
	now = now.Add(20 * time.Second)
	r.at("faults: kill-broker", 1, 5*time.Minute)
	now = now.Add(3 * time.Second)
	r.at("faults: kill-broker", 1, 4*time.Minute) // same stage within 10s: no line
	r.at("faults: pause-broker", 2, 4*time.Minute)
	now = now.Add(4 * time.Minute)
	r.at("recovery", 0, 0)
	r.at("final read and check", 0, 0)
	want := strings.Join([]string{
		"chaos: chaos start cluster, elapsed 0s, remaining 5m13s",
		"chaos: chaos faults: kill-broker, round 1, elapsed 20s, remaining 5m13s",
		"chaos: chaos faults: pause-broker, round 2, elapsed 23s, remaining 4m13s",
		"chaos: chaos recovery, elapsed 4m23s, remaining 13s",
		"chaos: chaos final read and check, elapsed 4m23s, remaining unknown",
	}, "\n") + "\n"
	if out.String() != want {
		t.Fatalf("progress:\n%s\nwant:\n%s", out.String(), want)
	}
}
