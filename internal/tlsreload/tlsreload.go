// Package tlsreload gives a TLS client its configuration from PEM files —
// the CAs that sign the server certificates and an optional client
// certificate — and picks up changes to those files without a restart:
// each new connection asks for the configuration, and the files are looked
// at again (by size and modification time) at most once per check interval.
// A change that does not load (a half-written file) keeps the last good
// configuration and is retried at the next check. Established connections
// keep what they negotiated.
package tlsreload

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Files names the client's PEM files. CAFile empty means the system pool;
// CertFile and KeyFile go together.
type Files struct {
	CAFile, CertFile, KeyFile string
	// ServerName overrides the name checked in server certificates
	// (default: the host dialed).
	ServerName string
}

// Client holds the current client configuration.
type Client struct {
	files Files
	every time.Duration
	now   func() time.Time

	mu      sync.Mutex
	cur     *tls.Config
	stamp   []fileStamp
	checked time.Time
	lastErr error
}

type fileStamp struct {
	size int64
	mod  time.Time
}

// DefaultCheck is how often the files are looked at again.
const DefaultCheck = 5 * time.Second

// New loads the files; an error means they are unusable. every is the
// check interval (0: DefaultCheck); now the clock (nil: time.Now).
func New(f Files, every time.Duration, now func() time.Time) (*Client, error) {
	if (f.CertFile == "") != (f.KeyFile == "") {
		return nil, errors.New("tlsreload: a client certificate needs both its certificate and key file")
	}
	if every <= 0 {
		every = DefaultCheck
	}
	if now == nil {
		now = time.Now
	}
	c := &Client{files: f, every: every, now: now}
	stamp, err := c.stat()
	if err != nil {
		return nil, err
	}
	if c.cur, err = c.load(); err != nil {
		return nil, err
	}
	c.stamp, c.checked = stamp, now()
	return c, nil
}

// Config returns the configuration for a new connection to host; callers
// may not modify it.
func (c *Client) Config(host string) *tls.Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.now(); t.Sub(c.checked) >= c.every {
		c.checked = t
		c.reload()
	}
	tc := c.cur.Clone()
	if tc.ServerName == "" {
		tc.ServerName = host
	}
	return tc
}

// Err is the last failed reload's error, nil once a reload succeeds.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

func (c *Client) reload() {
	stamp, err := c.stat()
	if err != nil {
		c.lastErr = err
		return
	}
	if sameStamps(stamp, c.stamp) {
		return
	}
	tc, err := c.load()
	if err != nil {
		c.lastErr = err
		return
	}
	c.cur, c.stamp, c.lastErr = tc, stamp, nil
}

func sameStamps(a, b []fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].size != b[i].size || !a[i].mod.Equal(b[i].mod) {
			return false
		}
	}
	return true
}

func (c *Client) stat() ([]fileStamp, error) {
	var out []fileStamp
	for _, p := range []string{c.files.CAFile, c.files.CertFile, c.files.KeyFile} {
		if p == "" {
			out = append(out, fileStamp{})
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("tlsreload: %w", err)
		}
		out = append(out, fileStamp{size: fi.Size(), mod: fi.ModTime()})
	}
	return out, nil
}

func (c *Client) load() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.files.ServerName}
	if c.files.CAFile != "" {
		pem, err := os.ReadFile(c.files.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tlsreload: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tlsreload: CA file %s holds no PEM certificate", c.files.CAFile)
		}
		tc.RootCAs = pool
	}
	if c.files.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(c.files.CertFile, c.files.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tlsreload: client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}
