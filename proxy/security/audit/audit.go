// Package audit writes security events as JSON lines: connections accepted
// and closed, authentications that succeeded or failed, re-authentications
// and credential changes. It never takes a secret: events carry who, where,
// how and why, not passwords or tokens. A nil *Log writes nothing (audit is
// off by default).
package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Event kinds.
const (
	ConnAccepted      = "connection_accepted"
	ConnClosed        = "connection_closed"
	AuthSuccess       = "authentication_succeeded"
	AuthFailure       = "authentication_failed"
	Reauthenticated   = "reauthenticated"
	CredentialChanged = "credential_changed"
	CredentialDeleted = "credential_deleted"
	Authorization     = "authorization" // a decision of the authorizer
)

// Event is one audit record. Empty fields are left out.
type Event struct {
	Time      time.Time `json:"time"`
	Event     string    `json:"event"`
	Listener  string    `json:"listener,omitempty"`
	Client    string    `json:"client,omitempty"` // remote address
	Principal string    `json:"principal,omitempty"`
	Mechanism string    `json:"mechanism,omitempty"`
	User      string    `json:"user,omitempty"` // whose credential changed
	Reason    string    `json:"reason,omitempty"`
	// Authorization decisions: what was asked, what was decided and the
	// ACL binding that decided it.
	API          string `json:"api,omitempty"`
	ResourceType string `json:"resource_type,omitempty"`
	Resource     string `json:"resource,omitempty"`
	Operation    string `json:"operation,omitempty"`
	Decision     string `json:"decision,omitempty"`
	Binding      string `json:"binding,omitempty"`
	Conn         uint64 `json:"conn,omitempty"`
}

// Log writes events to one writer, a line each.
type Log struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
	c   io.Closer
}

// New writes to w.
func New(w io.Writer) *Log { return &Log{w: w, now: time.Now} }

// Open writes to path (appending; "-" or "stderr" for standard error).
func Open(path string) (*Log, error) {
	if path == "-" || path == "stderr" {
		return New(os.Stderr), nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: open %s: %w", path, err)
	}
	l := New(f)
	l.c = f
	return l, nil
}

// Close closes the file Open opened.
func (l *Log) Close() error {
	if l == nil || l.c == nil {
		return nil
	}
	return l.c.Close()
}

// Write records e (its time set now); a write error is dropped, the
// connection it describes must not fail for it.
func (l *Log) Write(e Event) {
	if l == nil {
		return
	}
	e.Time = l.now().UTC()
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(b)
}
