package harness

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// connsTo counts the established TCP connections process pid holds to
// each of ports (IPv4 and IPv6), from its descriptors and the kernel's
// socket tables: how many upstream connections a proxy keeps per broker.
func connsTo(pid int, ports []string) ([]int, error) {
	inodes, err := socketInodes(pid)
	if err != nil {
		return nil, err
	}
	want := map[uint64]int{}
	for i, p := range ports {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("port %q: %w", p, err)
		}
		want[n] = i
	}
	out := make([]int, len(ports))
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue // no IPv6
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			// sl local rem st tx:rx tr:tm retrnsmt uid timeout inode
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || fs[3] != "01" || !inodes[fs[9]] { // 01: ESTABLISHED
				continue
			}
			_, port, ok := strings.Cut(fs[2], ":")
			if !ok {
				continue
			}
			n, err := strconv.ParseUint(port, 16, 16)
			if i, hit := want[n]; err == nil && hit {
				out[i]++
			}
		}
		f.Close()
	}
	return out, nil
}

// socketInodes is the set of socket inodes among pid's descriptors.
func socketInodes(pid int) (map[string]bool, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("descriptors of %d: %w", pid, err)
	}
	out := map[string]bool{}
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			out[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	return out, nil
}
