package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// kafkajsDriver drives kafkajs through node/compat.js, one subprocess per
// producer or consumer. kafkajs defaults apply apart from acks=-1, the
// codec, and per-record commits (see compat.js).
type kafkajsDriver struct{ rack string } // rack: rackId of its consumers (zone fetch)

// nodeDir is node/, relative to this package's directory.
var nodeDir = filepath.Join(".", "node")

func (kafkajsDriver) name() string { return "kafkajs" }

func (kafkajsDriver) version() string {
	v := readPackageVersion(filepath.Join(nodeDir, "node_modules", "kafkajs", "package.json"))
	if v == "" {
		return "not installed"
	}
	return fmt.Sprintf("%s (Node.js %s)", v, strings.TrimPrefix(commandOutput("node", "--version"), "v"))
}

func readPackageVersion(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(b, &pkg) != nil {
		return ""
	}
	return pkg.Version
}

func (kafkajsDriver) unavailable() string {
	if _, err := exec.LookPath("node"); err != nil {
		return "node is not on PATH: install Node.js 18+ and run scripts/install-clients.sh"
	}
	if readPackageVersion(filepath.Join(nodeDir, "node_modules", "kafkajs", "package.json")) == "" {
		return "kafkajs is not installed: run scripts/install-clients.sh (npm ci in integration/compat/node)"
	}
	return ""
}

func (kafkajsDriver) hasIdempotence() bool { return true }
func (kafkajsDriver) codecs() []codec      { return allCodecs }
func (kafkajsDriver) reportsEach() bool    { return false }
func (kafkajsDriver) notes() []string {
	var ps []string
	for _, p := range []string{"kafkajs-snappy", "lz4js", "zstd-codec"} {
		ps = append(ps, p+" "+readPackageVersion(filepath.Join(nodeDir, "node_modules", p, "package.json")))
	}
	return []string{
		"kafkajs ships gzip only; snappy, lz4 and zstd are codec plug-ins the application registers (here: " + strings.Join(ps, ", ") + ", pinned in node/package-lock.json).",
		"kafkajs has no consumer outside a group: the plain reads use a fresh group; group members commit after every record (kafkajs does not commit on disconnect).",
	}
}

func (kafkajsDriver) run(ctx context.Context, args ...string) (*proc, error) {
	return startProc(ctx, "node", append([]string{filepath.Join(nodeDir, "compat.js")}, args...), os.Environ())
}

// jsLine is any line compat.js prints.
type jsLine struct {
	Error   string `json:"error"`
	Crash   string `json:"crash"`
	Restart bool   `json:"restart"`
	Acked   int    `json:"acked"`
	Done    bool   `json:"done"`
	Brokers []struct {
		ID   int32  `json:"id"`
		Addr string `json:"addr"`
	} `json:"brokers"`
	Partitions []struct {
		Partition int32 `json:"partition"`
		Leader    int32 `json:"leader"`
	} `json:"partitions"`
	P *int32  `json:"p"`
	O int64   `json:"o"`
	K *string `json:"k"`
	V *string `json:"v"`
}

func parseJSLine(line string) (jsLine, error) {
	var l jsLine
	if err := json.Unmarshal([]byte(line), &l); err != nil {
		return l, fmt.Errorf("compat.js output %q: %w", line, err)
	}
	return l, nil
}

func (d kafkajsDriver) metadata(ctx context.Context, bootstrap []string, topic string) (metaView, error) {
	p, err := d.run(ctx, "metadata", "--bootstrap", strings.Join(bootstrap, ","), "--topic", topic)
	if err != nil {
		return metaView{}, err
	}
	waitErr := p.wait(ctx)
	mv := metaView{brokers: make(map[int32]string), leaders: make(map[int32]int32)}
	for line := range p.lines {
		l, err := parseJSLine(line)
		if err != nil {
			return metaView{}, err
		}
		if l.Error != "" {
			return metaView{}, fmt.Errorf("kafkajs metadata: %s", l.Error)
		}
		for _, b := range l.Brokers {
			mv.brokers[b.ID] = b.Addr
		}
		for _, pm := range l.Partitions {
			mv.leaders[pm.Partition] = pm.Leader
		}
	}
	if waitErr != nil {
		return metaView{}, fmt.Errorf("kafkajs metadata: %w", waitErr)
	}
	return mv, nil
}

func (d kafkajsDriver) produce(ctx context.Context, bootstrap []string, topic string, in <-chan Rec, o produceOpts) ([]Rec, error) {
	args := []string{"produce", "--bootstrap", strings.Join(bootstrap, ","), "--topic", topic}
	if o.codec != "" {
		args = append(args, "--codec", string(o.codec))
	}
	if o.idempotent {
		args = append(args, "--idempotent")
	}
	if o.deliveryTimeout > 0 {
		args = append(args, "--delivery-ms", strconv.FormatInt(o.deliveryTimeout.Milliseconds(), 10))
	}
	p, err := d.run(ctx, args...)
	if err != nil {
		return nil, err
	}
	var sent []Rec
	var writeErr error
	for r := range in {
		if writeErr != nil {
			continue // drain in so the feeder is not blocked
		}
		if _, err := fmt.Fprintf(p.stdin, "%s\t%s\n", r.Key, r.Value); err != nil {
			writeErr = fmt.Errorf("kafkajs produce: write stdin: %w", err)
			continue
		}
		sent = append(sent, r)
	}
	_ = p.stdin.Close()
	waitErr := p.wait(ctx)
	acked := 0
	var appErr error
	for line := range p.lines {
		l, err := parseJSLine(line)
		if err != nil {
			return nil, err
		}
		acked += l.Acked
		if l.Error != "" && appErr == nil {
			appErr = fmt.Errorf("kafkajs send: %s", l.Error)
		}
	}
	if acked > len(sent) {
		return nil, fmt.Errorf("kafkajs produce: %d acknowledged, %d sent", acked, len(sent))
	}
	// Sends are serialized, so what was acknowledged is a prefix.
	return sent[:acked], firstErr(writeErr, appErr, waitErr)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (kafkajsDriver) inZone(zone string) (driver, string) {
	return kafkajsDriver{rack: zone}, "consumer rackId"
}

func (d kafkajsDriver) consume(ctx context.Context, bootstrap []string, topic, group string) (stream, error) {
	args := []string{"consume", "--bootstrap", strings.Join(bootstrap, ","), "--topic", topic}
	if d.rack != "" {
		args = append(args, "--rack", d.rack)
	}
	if group == "" {
		args = append(args, "--plain", "--group", fmt.Sprintf("compat-plain-%d", rand.Int64()))
	} else {
		args = append(args, "--group", group)
	}
	p, err := d.run(ctx, args...)
	if err != nil {
		return nil, err
	}
	return procStream(ctx, p, func(line string) (Rec, bool, error) {
		l, err := parseJSLine(line)
		switch {
		case err != nil:
			return Rec{}, false, err
		case l.Error != "":
			return Rec{}, false, fmt.Errorf("kafkajs consumer: %s", l.Error)
		case l.Crash != "" && !l.Restart:
			return Rec{}, false, fmt.Errorf("kafkajs consumer crashed for good: %s", l.Crash)
		case l.P == nil:
			return Rec{}, false, nil
		}
		r := Rec{Partition: *l.P, Offset: l.O}
		if l.K != nil {
			r.Key = *l.K
		}
		if l.V != nil {
			r.Value = *l.V
		}
		return r, true, nil
	}), nil
}
