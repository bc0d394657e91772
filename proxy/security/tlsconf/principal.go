package tlsconf

import (
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/kproxy/kproxy/proxy/security/principal"
)

// Mapper turns a client certificate's subject into a principal name with
// Kafka's ssl.principal.mapping.rules: comma-separated rules, each DEFAULT
// (the whole distinguished name) or RULE:pattern/replacement/[LU] (the
// first rule whose pattern matches the whole name wins; L or U lower- or
// upper-cases the result). The name is the subject in RFC 2253 form, e.g.
// "CN=alice,OU=eng,O=Acme".
type Mapper struct{ rules []rule }

type rule struct {
	def   bool
	re    *regexp.Regexp
	repl  string
	lower bool
	upper bool
}

// ParseRules reads ssl.principal.mapping.rules ("" means DEFAULT).
func ParseRules(s string) (*Mapper, error) {
	m := &Mapper{}
	s = strings.TrimSpace(s)
	if s == "" {
		s = "DEFAULT"
	}
	for len(s) > 0 {
		switch {
		case strings.HasPrefix(s, "DEFAULT"):
			m.rules = append(m.rules, rule{def: true})
			s = s[len("DEFAULT"):]
		case strings.HasPrefix(s, "RULE:"):
			r, rest, err := parseRule(s[len("RULE:"):])
			if err != nil {
				return nil, err
			}
			m.rules, s = append(m.rules, r), rest
		default:
			return nil, fmt.Errorf("principal mapping rules: unexpected %q: want DEFAULT or RULE:pattern/replacement/[LU]", s)
		}
		s = strings.TrimSpace(s)
		if s != "" {
			if s[0] != ',' {
				return nil, fmt.Errorf("principal mapping rules: want a comma before %q", s)
			}
			s = strings.TrimSpace(s[1:])
		}
	}
	return m, nil
}

// parseRule reads pattern/replacement/[LU] (a slash inside is escaped as \/).
func parseRule(s string) (rule, string, error) {
	pat, s, ok := cutUnescaped(s)
	if !ok {
		return rule{}, "", errors.New("principal mapping rule: missing / after the pattern")
	}
	repl, s, ok := cutUnescaped(s)
	if !ok {
		return rule{}, "", errors.New("principal mapping rule: missing / after the replacement")
	}
	re, err := regexp.Compile("^(?:" + pat + ")$")
	if err != nil {
		return rule{}, "", fmt.Errorf("principal mapping rule pattern %q: %w", pat, err)
	}
	r := rule{re: re, repl: repl}
	if len(s) > 0 && (s[0] == 'L' || s[0] == 'U') {
		r.lower, r.upper = s[0] == 'L', s[0] == 'U'
		s = s[1:]
	}
	return r, s, nil
}

func cutUnescaped(s string) (before, after string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '/':
			b.WriteByte('/')
			i++
		case s[i] == '/':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", false
}

// Name maps a distinguished name; ok is false when no rule matches (Kafka
// then refuses the connection).
func (m *Mapper) Name(dn string) (string, bool) {
	for _, r := range m.rules {
		if r.def {
			return dn, true
		}
		idx := r.re.FindStringSubmatchIndex(dn)
		if idx == nil {
			continue
		}
		out := string(r.re.ExpandString(nil, r.repl, dn, idx))
		switch {
		case r.lower:
			out = strings.ToLower(out)
		case r.upper:
			out = strings.ToUpper(out)
		}
		return out, true
	}
	return "", false
}

// Principal maps a verified client certificate (nil: none was sent, the
// connection is anonymous).
func (m *Mapper) Principal(cert *x509.Certificate) (principal.Principal, error) {
	if cert == nil {
		return principal.Anonymous, nil
	}
	dn := cert.Subject.String()
	name, ok := m.Name(dn)
	if !ok || name == "" {
		return principal.Principal{}, fmt.Errorf("no principal mapping rule matches certificate subject %q", dn)
	}
	return principal.User(name), nil
}
