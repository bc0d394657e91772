package integration

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck/probe"
)

// probeCases are the hostile record shapes of the validation probe
// (package probe: count lies, varint overruns, junk in every codec, the
// 2^31 count, a header count with no headers, inner offsets that are not
// consecutive), as hostile cases.
func probeCases(t *testing.T) []hostileCase {
	t.Helper()
	byName := map[string]recordcheck.Reason{}
	for _, r := range recordcheck.Reasons() {
		byName[r.String()] = r
	}
	var out []hostileCase
	for _, s := range probe.Shapes() {
		r, ok := byName[s.Reason]
		if !ok {
			t.Fatalf("probe shape %q: no reason %q", s.Name, s.Reason)
		}
		out = append(out, hostileCase{s.Name, s.Records, s.Code, r})
	}
	return out
}

// kcatOrSkip returns kcat's path, or skips the test outside CI (CI must
// run it: .ci/run installs kcat).
func kcatOrSkip(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err == nil {
		return path
	}
	const how = "kcat not found: apt-get install kcat (scripts/install-clients.sh does in CI)"
	if os.Getenv("CI") == "true" {
		t.Fatal(how)
	}
	t.Skip(how)
	return ""
}

// kcatConsume reads every partition of topic from the start to its end
// with kcat (librdkafka), as a second client that must read what was
// acknowledged; it returns the records per partition.
func kcatConsume(t *testing.T, bootstrap, topic string, timeout time.Duration) map[int32][]record {
	t.Helper()
	kcat := kcatOrSkip(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
		"-f", "%p %o %s\n", "-X", "check.crcs=true")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat consume of %s: %v\n%s", topic, err, stderr.String())
	}
	got := map[int32][]record{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), " ", 3)
		if len(f) != 3 {
			t.Fatalf("kcat line %q", sc.Text())
		}
		p, _ := strconv.Atoi(f[0])
		o, _ := strconv.ParseInt(f[1], 10, 64)
		got[int32(p)] = append(got[int32(p)], record{int32(p), o, f[2]})
	}
	return got
}
