package store_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kproxy/kproxy/refbroker/store"
)

// Two FS instances on one directory behave as one store.
func TestFSSharedDirectory(t *testing.T) {
	dir := t.TempDir()
	a, b := mustFS(t, dir), mustFS(t, dir)
	const keys = 32
	var wg sync.WaitGroup
	results := make([][2]error, keys)
	for i, s := range []*store.FS{a, b} {
		wg.Go(func() {
			for k := range keys {
				results[k][i] = s.PutIfAbsent(ctx(t), fmt.Sprintf("shared/%d", k), []byte(fmt.Sprintf("fs-%d", i)))
			}
		})
	}
	wg.Wait()
	for k, r := range results {
		won := -1
		for i, err := range r {
			switch {
			case err == nil && won >= 0:
				t.Fatalf("key %d written by both instances", k)
			case err == nil:
				won = i
			case !errors.Is(err, store.ErrExists):
				t.Fatalf("key %d instance %d: %v", k, i, err)
			}
		}
		if won < 0 {
			t.Fatalf("key %d written by neither instance", k)
		}
		for _, s := range []*store.FS{a, b} {
			if got, err := s.Get(ctx(t), fmt.Sprintf("shared/%d", k)); err != nil || string(got) != fmt.Sprintf("fs-%d", won) {
				t.Fatalf("key %d reads %q, %v; winner was fs-%d", k, got, err, won)
			}
		}
	}
	if infos, err := b.List(ctx(t), "shared/"); err != nil || len(infos) != keys {
		t.Fatalf("list from the other instance: %d objects, %v", len(infos), err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, ".kproxy-tmp")); len(entries) != 0 {
		t.Fatalf("%d temporary files left behind", len(entries))
	}
}

const helperEnv = "STORE_TEST_HELPER_DIR"

// TestFSHelperProcess is not a test: TestFSProcesses runs it in child
// processes, each racing to create the same keys.
func TestFSHelperProcess(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("helper process only")
	}
	s := mustFS(t, dir)
	me := os.Getenv("STORE_TEST_HELPER_ID")
	for k := range 50 {
		err := s.PutIfAbsent(ctx(t), fmt.Sprintf("proc/%d", k), []byte(me))
		switch {
		case err == nil:
			fmt.Printf("won %d\n", k)
		case !errors.Is(err, store.ErrExists):
			fmt.Printf("error %d %v\n", k, err)
		}
	}
}

// Real processes sharing a directory: every key has exactly one winner and
// holds the winner's data.
func TestFSProcesses(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("inside a helper process")
	}
	dir := t.TempDir()
	const procs = 4
	outs := make([]bytes.Buffer, procs)
	cmds := make([]*exec.Cmd, procs)
	for i := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFSHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"="+dir, fmt.Sprintf("STORE_TEST_HELPER_ID=proc-%d", i))
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatalf("start helper %d: %v", i, err)
		}
		cmds[i] = cmd
	}
	winner := map[int]int{}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper %d: %v\n%s", i, err, outs[i].String())
		}
		sc := bufio.NewScanner(&outs[i])
		for sc.Scan() {
			var k int
			if strings.HasPrefix(sc.Text(), "error") {
				t.Fatalf("helper %d: %s", i, sc.Text())
			}
			if _, err := fmt.Sscanf(sc.Text(), "won %d", &k); err != nil {
				continue // test framework output
			}
			if prev, dup := winner[k]; dup {
				t.Fatalf("key %d won by processes %d and %d", k, prev, i)
			}
			winner[k] = i
		}
	}
	s := mustFS(t, dir)
	for k := range 50 {
		i, ok := winner[k]
		if !ok {
			t.Fatalf("key %d won by no process", k)
		}
		if got, err := s.Get(ctx(t), fmt.Sprintf("proc/%d", k)); err != nil || string(got) != fmt.Sprintf("proc-%d", i) {
			t.Fatalf("key %d holds %q, %v; winner proc-%d", k, got, err, i)
		}
	}
}

func TestFSLayoutAndTemp(t *testing.T) {
	dir := t.TempDir()
	s := mustFS(t, dir)
	mustPut(t, s, "a/b/c", "x")
	if got, err := os.ReadFile(filepath.Join(dir, "a", "b", "c")); err != nil || string(got) != "x" {
		t.Fatalf("object file = %q, %v", got, err)
	}
	if err := s.Delete(ctx(t), "a/b/c"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty directories left after delete: %v", err)
	}
	// A crashed writer's temporary file is cleaned only once old enough.
	stale := filepath.Join(dir, ".kproxy-tmp", "put-crashed")
	if err := os.WriteFile(stale, []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := s.CleanTemp(time.Hour, time.Now()); err != nil || n != 0 {
		t.Fatalf("clean young temp files: %d, %v", n, err)
	}
	if n, err := s.CleanTemp(time.Hour, time.Now().Add(2*time.Hour)); err != nil || n != 1 {
		t.Fatalf("clean old temp files: %d, %v", n, err)
	}
	if infos, _ := s.List(ctx(t), ""); len(infos) != 0 {
		t.Fatalf("list shows %d objects, want 0 (temp files are not objects)", len(infos))
	}
}
