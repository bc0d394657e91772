package testrig

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer that goroutines may write while a test
// reads it (a proxy's log or audit log, a subprocess's output). The zero
// value is ready.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// String is everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}
