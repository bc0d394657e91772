package compat

import (
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
)

// moduleVersion reports the version of a Go module linked into the test
// binary, as go.mod pins it.
func moduleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, m := range bi.Deps {
		if m.Path == path {
			if m.Replace != nil {
				return m.Replace.Version
			}
			return m.Version
		}
	}
	return "unknown"
}

// commandOutput runs a short version query; "" when it fails.
func commandOutput(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func ciMode() bool { return os.Getenv("CI") == "true" }
