package testrig

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Kcat runs kcat against broker addr with the librdkafka properties file
// props, stdin as its input, and returns what it printed; its stderr is in
// the error.
func Kcat(ctx context.Context, addr, props, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "kcat", append([]string{"-F", props, "-b", addr, "-q"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kcat %v: %w\n%s", args, err, stderr.String())
	}
	return string(out), nil
}
