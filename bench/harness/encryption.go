package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/kproxy/kproxy/testkit/testrig"
)

// The encryption scenarios measure what record encryption costs: the plain
// proxy forwards produce-1k as it is, and a second proxy with
// --encryption-config (moto_server's KMS) encrypts every value of the same
// workload; for fetch, both read data the encrypting proxy wrote, which
// the plain proxy passes on as it is and the encrypting one decrypts
// (docs/encryption.md).
const (
	sideEncrypted         = "kproxy-encrypted"
	encryptionTopicPrefix = "encryption-bench-"
	// encryptionCPUGoal is the most CPU per MB encryption may take, as a
	// multiple of the same topic unencrypted (issue 30).
	encryptionCPUGoal = 3.0
	encryptionID      = "encryption-produce-1k"
	encryptionFetchID = "encryption-fetch"
	encryptionAlias   = "alias/kproxy-bench"
)

var encryptionSides = []string{sideProxy, sideEncrypted}

func (h *Harness) encryptionScenario(ctx context.Context) error {
	if !h.selected(encryptionID, encryptionFetchID) {
		return nil
	}
	endpoint, stop, err := h.startMoto(ctx)
	if err != nil {
		return fmt.Errorf("scenario %s: %w", encryptionID, err)
	}
	defer stop()
	file := filepath.Join(h.dir, "encryption.yaml")
	conf := fmt.Sprintf("kms:\n  type: aws\n  endpoint: %s\n  region: us-east-1\ntopics:\n  - match: \"%s*\"\n    key: %s\n",
		endpoint, encryptionTopicPrefix, encryptionAlias)
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		return err
	}
	if err := h.cluster.startAltProxy(ctx, "--encryption-config", file); err != nil {
		return fmt.Errorf("start the encrypting proxy: %w", err)
	}
	defer h.cluster.stopAltProxy()
	if h.selected(encryptionID) {
		what := "as produce-1k, on kproxy (the topic is not encrypted: record data forwarded as it is) and kproxy-encrypted (--encryption-config with moto_server's KMS: every value sealed with AES-256-GCM, each batch rebuilt with its length and CRC-32C)"
		if err := h.compareEncrypted(ctx, encryptionID, "Produce 1 KiB records, encrypted vs not", what,
			h.freshPlan(encryptionTopicPrefix+"1k", h.produceFor(produceArgs{recordSize: 1024, producers: 8, clients: 8}))); err != nil {
			return err
		}
	}
	if h.selected(encryptionFetchID) {
		what := "as fetch, of data produced through kproxy-encrypted (every value encrypted): kproxy passes the stored records on as they are, kproxy-encrypted decrypts each value and rebuilds each batch"
		if err := h.compareEncrypted(ctx, encryptionFetchID, "Fetch, encrypted vs not", what,
			h.fillPlanVia(encryptionTopicPrefix+"fetch", sideEncrypted)); err != nil {
			return err
		}
	}
	return nil
}

// compareEncrypted runs plan on the plain and the encrypting proxy.
func (h *Harness) compareEncrypted(ctx context.Context, id, title, what string, plan roundPlan) error {
	res, err := h.compareSides(ctx, id, title, what, encryptionSides, plan)
	if err != nil {
		return err
	}
	p, _ := res.side(sideProxy)
	e, _ := res.side(sideEncrypted)
	res.Ratios = []Ratio{
		{"encrypted / plain CPU per MB", div(e.IntermediaryCPUMsPerMB, p.IntermediaryCPUMsPerMB), "x"},
		{"encrypted / plain throughput", div(e.RecordsPerSec, p.RecordsPerSec), "x"},
		{"encrypted - plain p99", float64(e.Latency.P99-p.Latency.P99) / 1000, "ms"},
	}
	h.report.Scenarios = append(h.report.Scenarios, res)
	return nil
}

// startMoto runs moto_server with a key under encryptionAlias and puts the
// credentials the proxy's AWS SDK reads in the environment its children
// inherit; stop ends it.
func (h *Harness) startMoto(ctx context.Context) (endpoint string, stop func(), err error) {
	path, err := exec.LookPath("moto_server")
	if err != nil {
		return "", nil, fmt.Errorf("moto_server is not installed (pip install 'moto[server]'): %w", err)
	}
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_EC2_METADATA_DISABLED": "true"} {
		if err := os.Setenv(k, v); err != nil {
			return "", nil, err
		}
	}
	addr, err := testrig.FreeAddr()
	if err != nil {
		return "", nil, err
	}
	host, port, _ := net.SplitHostPort(addr)
	p := testrig.NewProc(testrig.Spec{Name: "moto_server", Path: path, Args: []string{"-H", host, "-p", port}, LogPath: filepath.Join(h.dir, "moto.log")})
	if err := p.Start(ctx); err != nil {
		return "", nil, err
	}
	stop = func() { _ = p.Kill() }
	endpoint = "http://" + addr
	err = testrig.WaitFor(ctx, "moto_server", p, time.Minute, func(ctx context.Context) error {
		c := kms.New(kms.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
			Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", "")})
		k, err := c.CreateKey(ctx, &kms.CreateKeyInput{})
		if err != nil {
			return err
		}
		_, err = c.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(encryptionAlias), TargetKeyId: k.KeyMetadata.KeyId})
		return err
	})
	if err != nil {
		stop()
		return "", nil, err
	}
	return endpoint, stop, nil
}

// evaluateEncryption checks encryption's CPU per MB against the same
// workload unencrypted.
func (r *Report) evaluateEncryption() {
	for _, id := range []string{encryptionID, encryptionFetchID} {
		r.Targets = append(r.Targets, r.cpuRatioTarget(id, "proxy CPU per MB on an encrypted topic, "+id,
			fmt.Sprintf("<= %.1f x unencrypted", encryptionCPUGoal), encryptionCPUGoal, sideEncrypted, sideProxy))
	}
	for _, g := range []struct {
		bench string
		mbps  float64
	}{{"BenchmarkEncrypt/none", 1000}, {"BenchmarkEncrypt/lz4", 300}} {
		name, goal := "encrypting 1 KiB records on one core, "+g.bench, fmt.Sprintf(">= %.0f MB/s", g.mbps)
		t := Target{Name: name, Goal: goal, Figure: "-", Status: "not run"}
		for _, b := range r.Routing {
			if m := mbPerSec.FindStringSubmatch(b.Metrics); b.Package == "proxy/crypt" && b.Name == g.bench && m != nil {
				v, _ := strconv.ParseFloat(m[1], 64)
				t.Figure, t.Status = fmt.Sprintf("%.0f MB/s", v), status(v >= g.mbps)
			}
		}
		r.Targets = append(r.Targets, t)
	}
}

var mbPerSec = regexp.MustCompile(`([\d.]+) MB/s`)
