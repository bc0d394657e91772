package crypt

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// File is the encryption configuration file (YAML); docs/encryption.md
// describes it. Unknown fields are refused, so that a misspelt setting
// does not silently leave a topic unencrypted.
type File struct {
	KMS    KMSConfig   `yaml:"kms"`
	Topics []TopicRule `yaml:"topics"`
	// UnresolvedKey is what a produce to an encrypted topic does when the
	// KMS refuses its key: reject (the default: the partition fails) or
	// passthrough (the records are written in plaintext).
	UnresolvedKey string    `yaml:"unresolved_key"`
	DEK           DEKConfig `yaml:"dek"`
	// MaxBatchBytes bounds what one compressed batch may decompress to
	// [128 MiB].
	MaxBatchBytes int `yaml:"max_batch_bytes"`
	// DecompressBudgetBytes bounds what the compressed batches being
	// rewritten at once may decompress to, with their rewritten copies
	// [2 x MaxBatchBytes; at least MaxBatchBytes].
	DecompressBudgetBytes int64 `yaml:"decompress_budget_bytes"`
}

// KMSConfig names the KMS.
type KMSConfig struct {
	Type     string        `yaml:"type"`     // aws (the AWS KMS API: AWS, LocalStack, moto)
	Endpoint string        `yaml:"endpoint"` // default: AWS's for the region
	Region   string        `yaml:"region"`
	Timeout  time.Duration `yaml:"timeout"` // one call [5s]
}

// TopicRule encrypts the topics Match names (a name or a glob: * ? [..])
// under Key, a KEK id, ARN or alias in which {topic} stands for the topic.
// The first rule that matches a topic wins.
type TopicRule struct {
	Match string `yaml:"match"`
	Key   string `yaml:"key"`
}

// DEKConfig are the DEK limits (Limits).
type DEKConfig struct {
	RefreshAfter   time.Duration `yaml:"refresh_after"`
	ExpireAfter    time.Duration `yaml:"expire_after"`
	MaxEncryptions int64         `yaml:"max_encryptions"`
	CacheSize      int           `yaml:"cache_size"`
}

const defaultMaxBatchBytes = 128 << 20

// ParseFile reads and checks a configuration file's contents.
func ParseFile(data []byte) (File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return File{}, fmt.Errorf("crypt: encryption config: %w", err)
	}
	if f.KMS.Type != "aws" {
		return File{}, fmt.Errorf("crypt: encryption config: kms.type %q: want aws", f.KMS.Type)
	}
	if f.KMS.Region == "" {
		return File{}, errors.New("crypt: encryption config: kms.region is required")
	}
	switch f.UnresolvedKey {
	case "":
		f.UnresolvedKey = "reject"
	case "reject", "passthrough":
	default:
		return File{}, fmt.Errorf("crypt: encryption config: unresolved_key %q: want reject or passthrough", f.UnresolvedKey)
	}
	if f.MaxBatchBytes <= 0 {
		f.MaxBatchBytes = defaultMaxBatchBytes
	}
	if f.DecompressBudgetBytes <= 0 {
		f.DecompressBudgetBytes = 2 * int64(f.MaxBatchBytes)
	}
	if f.DecompressBudgetBytes < int64(f.MaxBatchBytes) {
		return File{}, fmt.Errorf("crypt: encryption config: decompress_budget_bytes %d is below max_batch_bytes %d: the largest batch could never be rewritten", f.DecompressBudgetBytes, f.MaxBatchBytes)
	}
	if _, err := compile(f); err != nil {
		return File{}, err
	}
	return f, nil
}

// limits are f's DEK limits, defaults filled in.
func (f File) limits() Limits {
	return Limits{
		RefreshAfter: f.DEK.RefreshAfter, ExpireAfter: f.DEK.ExpireAfter,
		MaxEncryptions: f.DEK.MaxEncryptions, CacheSize: f.DEK.CacheSize,
	}.withDefaults()
}

// policy is File's topic rules compiled: a map for plain names and the
// globs in order, so that the check on each partition of each produce and
// fetch costs a map lookup (and a match per glob), never anything per
// record.
type policy struct {
	exact       map[string]int // name: rule index
	globs       []int          // indexes of the rules with glob patterns
	rules       []TopicRule
	passthrough bool
}

func compile(f File) (*policy, error) {
	p := &policy{exact: map[string]int{}, rules: f.Topics, passthrough: f.UnresolvedKey == "passthrough"}
	for i, r := range f.Topics {
		if r.Match == "" || r.Key == "" {
			return nil, fmt.Errorf("crypt: encryption config: topics[%d] needs match and key", i)
		}
		if !strings.ContainsAny(r.Match, `*?[\`) {
			if _, dup := p.exact[r.Match]; !dup {
				p.exact[r.Match] = i
			}
			continue
		}
		if _, err := path.Match(r.Match, ""); err != nil {
			return nil, fmt.Errorf("crypt: encryption config: topics[%d] match %q: %w", i, r.Match, err)
		}
		p.globs = append(p.globs, i)
	}
	return p, nil
}

// kek is the KEK of topic, and whether the topic is encrypted.
func (p *policy) kek(topic string) (string, bool) {
	i := p.rule(topic)
	if i < 0 {
		return "", false
	}
	key := p.rules[i].Key
	if strings.Contains(key, "{topic}") {
		key = strings.ReplaceAll(key, "{topic}", topic)
	}
	return key, true
}

// rule is the index of the first rule matching topic, or -1.
func (p *policy) rule(topic string) int {
	best := -1
	if i, ok := p.exact[topic]; ok {
		best = i
	}
	for _, i := range p.globs {
		if best >= 0 && i > best {
			break
		}
		if ok, _ := path.Match(p.rules[i].Match, topic); ok {
			best = i
			break
		}
	}
	return best
}
