package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// kcatDriver drives the kcat binary (Debian's kcat, with Debian's
// librdkafka) as a subprocess: -P reading key:value lines from stdin, -C and
// -G printing JSON. librdkafka defaults apply apart from acks=all, the codec,
// and auto.offset.reset=earliest for groups.
type kcatDriver struct{ rack string } // rack: client.rack of its consumers (zone fetch)

func (kcatDriver) name() string { return "kcat" }

func (kcatDriver) version() string {
	out := commandOutput("kcat", "-V")
	m := regexp.MustCompile(`Version (\S+) .*librdkafka (\S+)`).FindStringSubmatch(out)
	if m == nil {
		return "not installed"
	}
	return fmt.Sprintf("%s (librdkafka %s)", m[1], m[2])
}

func (kcatDriver) unavailable() string {
	if _, err := exec.LookPath("kcat"); err != nil {
		return "kcat is not on PATH: run scripts/install-clients.sh (apt-get install kcat)"
	}
	return ""
}

func (kcatDriver) hasIdempotence() bool { return true }
func (kcatDriver) codecs() []codec      { return allCodecs }
func (kcatDriver) reportsEach() bool    { return false }
func (kcatDriver) notes() []string {
	return []string{
		"run as a subprocess; a producer run passes only if kcat exits 0, i.e. no delivery report failed.",
		"librdkafka 2.0.2 compresses with gzip, snappy or lz4 only if the broker's ApiVersions answer includes Produce v0 (lz4 also FindCoordinator v0); otherwise it sends the batch uncompressed (logged only at debug level: 'Broker does not support compression type') (newer librdkafka checks the negotiated version instead).",
	}
}

func (d kcatDriver) run(ctx context.Context, args ...string) (*proc, error) {
	return startProc(ctx, "kcat", args, os.Environ())
}

type kcatMeta struct {
	Brokers []struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"brokers"`
	Topics []struct {
		Topic      string `json:"topic"`
		Error      string `json:"error"`
		Partitions []struct {
			Partition int32 `json:"partition"`
			Leader    int32 `json:"leader"`
		} `json:"partitions"`
	} `json:"topics"`
}

func (d kcatDriver) metadata(ctx context.Context, bootstrap []string, topic string) (metaView, error) {
	p, err := d.run(ctx, "-L", "-J", "-m", "30", "-b", strings.Join(bootstrap, ","), "-t", topic)
	if err != nil {
		return metaView{}, err
	}
	if err := p.wait(ctx); err != nil {
		return metaView{}, fmt.Errorf("kcat -L: %w", err)
	}
	var out strings.Builder
	for l := range p.lines {
		out.WriteString(l)
	}
	var md kcatMeta
	if err := json.Unmarshal([]byte(out.String()), &md); err != nil {
		return metaView{}, fmt.Errorf("kcat -L: parse %q: %w", out.String(), err)
	}
	mv := metaView{brokers: make(map[int32]string), leaders: make(map[int32]int32)}
	for _, b := range md.Brokers {
		mv.brokers[b.ID] = b.Name
	}
	for _, t := range md.Topics {
		if t.Error != "" {
			return metaView{}, fmt.Errorf("kcat -L %s: %s", topic, t.Error)
		}
		for _, pm := range t.Partitions {
			mv.leaders[pm.Partition] = pm.Leader
		}
	}
	return mv, nil
}

func (d kcatDriver) produce(ctx context.Context, bootstrap []string, topic string, in <-chan Rec, o produceOpts) ([]Rec, error) {
	args := []string{"-P", "-b", strings.Join(bootstrap, ","), "-t", topic, "-K", ":", "-X", "acks=all"}
	if o.codec != "" {
		args = append(args, "-z", string(o.codec))
	}
	if o.idempotent {
		args = append(args, "-X", "enable.idempotence=true")
	}
	if o.deliveryTimeout > 0 {
		args = append(args, "-X", fmt.Sprintf("message.timeout.ms=%d", o.deliveryTimeout.Milliseconds()))
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
		if _, err := fmt.Fprintf(p.stdin, "%s:%s\n", r.Key, r.Value); err != nil {
			writeErr = fmt.Errorf("kcat -P: write stdin: %w", err)
			continue
		}
		sent = append(sent, r)
	}
	_ = p.stdin.Close()
	// kcat waits for every delivery report and exits 1 if any failed; it
	// does not say which, so a failed run acknowledges nothing.
	if err := firstErr(writeErr, p.wait(ctx)); err != nil {
		tail := p.stderrTail()
		return nil, fmt.Errorf("kcat -P: %s%w (stderr: %s)", kcatLastError(tail), err, tail)
	}
	return sent, nil
}

// kcatLastError is the last "% ERROR: " line kcat printed (with ": "), the
// reason it gave for failing, or "".
func kcatLastError(stderr string) string {
	lines := strings.Split(stderr, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if msg, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "% ERROR: "); ok {
			return msg + ": "
		}
	}
	return ""
}

// kcatRecord is one line of kcat -J consumer output.
type kcatRecord struct {
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Key       *string `json:"key"`
	Payload   *string `json:"payload"`
}

func (kcatDriver) inZone(zone string) (driver, string) {
	return kcatDriver{rack: zone}, "-X client.rack"
}

func (d kcatDriver) consume(ctx context.Context, bootstrap []string, topic, group string) (stream, error) {
	args := []string{"-b", strings.Join(bootstrap, ","), "-J", "-u"}
	if d.rack != "" {
		args = append(args, "-X", "client.rack="+d.rack)
	}
	if group == "" {
		args = append(args, "-C", "-t", topic, "-o", "beginning")
	} else {
		// No -o here: in -G mode kcat would force it onto every
		// assignment and ignore the committed offsets.
		args = append(args, "-G", group, "-X", "auto.offset.reset=earliest", topic)
	}
	p, err := d.run(ctx, args...)
	if err != nil {
		return nil, err
	}
	return procStream(ctx, p, parseKcatLine), nil
}

func parseKcatLine(line string) (Rec, bool, error) {
	var kr kcatRecord
	if err := json.Unmarshal([]byte(line), &kr); err != nil {
		return Rec{}, false, fmt.Errorf("kcat output %q: %w", line, err)
	}
	r := Rec{Partition: kr.Partition, Offset: kr.Offset}
	if kr.Key != nil {
		r.Key = *kr.Key
	}
	if kr.Payload != nil {
		r.Value = *kr.Payload
	}
	return r, true, nil
}

// procStream turns a consumer subprocess's stdout into a stream; parse says
// whether a line is a record.
func procStream(ctx context.Context, p *proc, parse func(string) (Rec, bool, error)) stream {
	s, loopCtx := newChanStream(ctx)
	go func() {
		defer s.loopDone()
		for {
			select {
			case line, ok := <-p.lines:
				if !ok {
					if loopCtx.Err() == nil {
						s.fail(fmt.Errorf("%s exited early: %v (stderr: %s)", p.name, p.wait(loopCtx), p.stderrTail()))
					}
					return
				}
				r, isRec, err := parse(line)
				if err != nil {
					s.fail(err)
					continue
				}
				if isRec {
					s.push(r)
				}
			case <-loopCtx.Done():
				return
			}
		}
	}()
	s.shutdown = func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return p.stop(ctx)
	}
	return s
}
