package security

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/testkit/testrig"
)

// The six clients over SASL_SSL with SCRAM-SHA-512 are the client matrix's
// SASL_SSL column (integration/compat); kcat here serves the mTLS test.
const clientRecords = 5

func kcatRoundTrip(t *testing.T, addr, props string) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat is not on PATH: run scripts/install-clients.sh")
	}
	topic := "kcat-rt-" + strings.ReplaceAll(filepath.Base(filepath.Dir(props)), "_", "")
	lines := make([]string, clientRecords)
	for i := range lines {
		lines[i] = fmt.Sprint(i)
	}
	kcat(t, addr, props, strings.Join(lines, "\n")+"\n", "-P", "-t", topic)
	if got := kcat(t, addr, props, "", "-C", "-t", topic, "-e", "-o", "beginning"); len(strings.Fields(got)) != clientRecords {
		t.Fatalf("kcat -C read %q, want %d records", got, clientRecords)
	}
	if got := kcat(t, addr, props, "", "-G", topic+"-group", "-c", fmt.Sprint(clientRecords), "-o", "beginning", topic); len(strings.Fields(got)) != clientRecords {
		t.Fatalf("kcat -G read %q, want %d records", got, clientRecords)
	}
}

func kcat(t *testing.T, addr, props, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := testrig.Kcat(ctx, addr, props, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
