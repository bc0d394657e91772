package kafscalerig

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// SrcEnv names the folder holding KafScale's build.sh and source archive.
const SrcEnv = "KAFSCALE_SRC"

// Bins are the built KafScale programs.
type Bins struct {
	Broker string // kafscale-broker
	Proxy  string // kafscale-proxy
}

// Build builds KafScale's broker and proxy from the archive in src with its
// build.sh, once per archive: into cacheRoot/<first 12 hex digits of the
// archive's SHA-256>/, so that a rerun (or another test package building at
// the same time, serialised by a lock file) finds them there at once.
func Build(ctx context.Context, src, cacheRoot string) (Bins, error) {
	archive, err := findArchive(src)
	if err != nil {
		return Bins{}, err
	}
	sum, err := fileHash(archive)
	if err != nil {
		return Bins{}, err
	}
	dir := filepath.Join(cacheRoot, sum[:12])
	bins := Bins{Broker: filepath.Join(dir, "kafscale-broker"), Proxy: filepath.Join(dir, "kafscale-proxy")}
	if bins.exist() {
		return bins, nil
	}
	if err := os.MkdirAll(cacheRoot, 0o755); err != nil {
		return Bins{}, fmt.Errorf("kafscale build: %w", err)
	}
	unlock, err := lock(filepath.Join(cacheRoot, ".lock"))
	if err != nil {
		return Bins{}, err
	}
	defer unlock()
	if bins.exist() { // built by whoever held the lock
		return bins, nil
	}
	// Into a fresh folder renamed into place: a killed build never leaves
	// half a cache entry that a later run would trust.
	tmp, err := os.MkdirTemp(cacheRoot, "build-")
	if err != nil {
		return Bins{}, fmt.Errorf("kafscale build: %w", err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(src, "build.sh"), tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		return Bins{}, fmt.Errorf("kafscale build.sh %s: %w\n%s", src, err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(tmp, dir); err != nil {
		return Bins{}, fmt.Errorf("kafscale build: %w", err)
	}
	if !bins.exist() {
		return Bins{}, fmt.Errorf("kafscale build.sh %s: no kafscale-broker and kafscale-proxy in its output", src)
	}
	return bins, nil
}

func (b Bins) exist() bool {
	for _, p := range []string{b.Broker, b.Proxy} {
		if st, err := os.Stat(p); err != nil || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

func findArchive(src string) (string, error) {
	if _, err := os.Stat(filepath.Join(src, "build.sh")); err != nil {
		return "", fmt.Errorf("%s=%s: no build.sh there: %w", SrcEnv, src, err)
	}
	m, err := filepath.Glob(filepath.Join(src, "kafscale-platform-*.tar.gz"))
	if err != nil || len(m) == 0 {
		return "", fmt.Errorf("%s=%s: no kafscale-platform-*.tar.gz there", SrcEnv, src)
	}
	return m[0], nil
}

func fileHash(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// lock takes an exclusive flock on path; the lock ends with the process
// too, so a killed build never leaves it held.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kafscale build lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("kafscale build lock: %w", err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
