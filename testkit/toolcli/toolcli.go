// Package toolcli is the command-line set-up the measurement tools share
// (benchrun, scalerun, zonesrun, ksoak, kchaos): the -docs flag, which is
// the only way a tool writes into docs/ (empty by default, so a run with
// default flags leaves the tree as it was; the Makefile targets pass it),
// the context that ends on an interrupt or SIGTERM, and the command line a
// report names to reproduce it. It holds no state: each call works on the
// flag set and arguments it is given.
package toolcli

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// DocsFlag defines -docs on fs: the page the tool writes, what it is, and
// which make target writes it.
func DocsFlag(fs *flag.FlagSet, what, makeTarget string) *string {
	return fs.String("docs", "", "write "+what+" to `PATH` (default: nothing is written; "+makeTarget+" passes the page under docs/)")
}

// Context is a context that ends on an interrupt or SIGTERM; call stop to
// release the signal handler.
func Context() (ctx context.Context, stop context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Command is the command line that reproduces a run given args (os.Args[1:]):
// makeTarget when args set nothing but -docs (what the Makefile target
// runs), else `go run pkg` with args.
func Command(makeTarget, pkg string, args []string) string {
	if len(withoutDocs(args)) == 0 {
		return makeTarget
	}
	return "go run " + pkg + " " + strings.Join(args, " ")
}

// withoutDocs is args without -docs and its value.
func withoutDocs(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := strings.TrimPrefix(args[i], "-")
		switch {
		case a == "docs" || a == "-docs":
			i++ // its value
		case strings.HasPrefix(a, "docs=") || strings.HasPrefix(a, "-docs="):
		default:
			out = append(out, args[i])
		}
	}
	return out
}
