// Package motokms runs moto_server's KMS for tests: one process on a free
// 127.0.0.1 port, with a symmetric key and an alias made through the AWS
// SDK, and the AWS credentials the SDK's chain reads set in the test's
// environment. Tests skip when moto_server is not installed, except under
// CI=true, where they fail. It is imported by tests only.
package motokms

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/kproxy/kproxy/testkit/testrig"
)

// Missing says how to install moto_server, for a test that skips without it.
const Missing = "moto_server is not installed (pip install 'moto[server]')"

// Installed reports whether moto_server is on PATH.
func Installed() bool {
	_, err := exec.LookPath("moto_server")
	return err == nil
}

// Server is a running moto_server.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
	Proc     *testrig.Proc
	addr     string
}

// Start runs moto_server until the test ends. It sets AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_REGION (us-east-1) for the whole process,
// where the proxies' SDK chain reads them: always the same values, so
// parallel tests may share them (t.Setenv refuses parallel tests).
func Start(t testing.TB) *Server {
	t.Helper()
	path, err := exec.LookPath("moto_server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: %s: %v", Missing, err)
		}
		t.Skipf("%s: %v", Missing, err)
	}
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
		"AWS_EC2_METADATA_DISABLED": "true", // never ask 169.254.169.254
	} {
		if err := os.Setenv(k, v); err != nil {
			t.Fatal(err)
		}
	}
	addr, err := testrig.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(addr)
	p := testrig.NewProc(testrig.Spec{
		Name: "moto_server", Path: path, Args: []string{"-H", host, "-p", port},
		LogPath: filepath.Join(t.TempDir(), "moto.log"),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatalf("start moto_server: %v", err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	s := &Server{Endpoint: "http://" + addr, Proc: p, addr: addr}
	if err := s.WaitUp(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// WaitUp waits until moto_server accepts connections.
func (s *Server) WaitUp(ctx context.Context) error {
	return testrig.WaitFor(ctx, "moto_server", s.Proc, 60*time.Second, func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", s.addr)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// Client is an SDK client of the server's KMS.
func (s *Server) Client() *kms.Client {
	return kms.New(kms.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(s.Endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", ""),
	})
}

// CreateKey makes a symmetric key named by alias (e.g. alias/kproxy-test)
// and returns its id.
func (s *Server) CreateKey(t testing.TB, alias string) string {
	t.Helper()
	return s.aliasNewKey(t, alias, func(ctx context.Context, c *kms.Client, id *string) error {
		_, err := c.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: id})
		return err
	})
}

// Retarget points alias at a new key (KEK rotation) and returns its id.
func (s *Server) Retarget(t testing.TB, alias string) string {
	t.Helper()
	return s.aliasNewKey(t, alias, func(ctx context.Context, c *kms.Client, id *string) error {
		_, err := c.UpdateAlias(ctx, &kms.UpdateAliasInput{AliasName: aws.String(alias), TargetKeyId: id})
		return err
	})
}

// aliasNewKey makes a key and has point name alias at it.
func (s *Server) aliasNewKey(t testing.TB, alias string, point func(context.Context, *kms.Client, *string) error) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := s.Client()
	k, err := c.CreateKey(ctx, &kms.CreateKeyInput{})
	if err != nil {
		t.Fatalf("moto CreateKey: %v", err)
	}
	if err := point(ctx, c, k.KeyMetadata.KeyId); err != nil {
		t.Fatalf("moto alias %s: %v", alias, err)
	}
	return *k.KeyMetadata.KeyId
}
