package layout

import (
	"net/url"
	"strings"
)

// Quota keys live outside MetaPrefix: proxies write them (AlterClientQuotas,
// replica registration) and only proxies watch them.
//
//	<prefix>/quota/entities/users/<user>                   a user's quotas
//	<prefix>/quota/entities/users/<user>/clients/<client>  a user and client id's
//	<prefix>/quota/entities/clients/<client>               a client id's
//	<prefix>/quota/replicas/<id>                           a live proxy, under its lease
//
// <user> and <client> are sanitized as Kafka sanitizes them (URL encoding);
// QuotaDefault names the default entity. Entity values are QuotaValues JSON.

// QuotaDefault is the name of a default entity in a quota key, as Kafka
// writes it; a real name "<default>" is sanitized to "%3Cdefault%3E".
const QuotaDefault = "<default>"

// QuotaValues is the value of an entity key: quota name (producer_byte_rate,
// consumer_byte_rate, request_percentage) to its value.
type QuotaValues map[string]float64

// QuotaPrefix covers every quota key, entities and replicas.
func (l Layout) QuotaPrefix() string { return l.prefix + "/quota/" }

// QuotaEntityPrefix covers every entity key.
func (l Layout) QuotaEntityPrefix() string { return l.QuotaPrefix() + "entities/" }

// QuotaReplicaPrefix covers every live proxy's registration.
func (l Layout) QuotaReplicaPrefix() string { return l.QuotaPrefix() + "replicas/" }

// QuotaReplicaKey is a proxy's registration, held under its lease.
func (l Layout) QuotaReplicaKey(id string) string { return l.QuotaReplicaPrefix() + id }

// QuotaEntityName is one part of a quota entity: a name, or the default
// (Default set, Name ignored).
type QuotaEntityName struct {
	Name    string
	Default bool
}

// QuotaEntity is a quota's target. A nil part is absent: {User, nil} is a
// user's quota for all its clients. At least one part is set.
type QuotaEntity struct {
	User, Client *QuotaEntityName
}

// QuotaEntityKey is the key of e's quotas.
func (l Layout) QuotaEntityKey(e QuotaEntity) string {
	var b strings.Builder
	b.WriteString(l.QuotaEntityPrefix())
	if e.User != nil {
		b.WriteString("users/")
		b.WriteString(sanitize(*e.User))
		if e.Client != nil {
			b.WriteString("/")
		}
	}
	if e.Client != nil {
		b.WriteString("clients/")
		b.WriteString(sanitize(*e.Client))
	}
	return b.String()
}

// ParseQuotaEntityKey reads an entity key; ok is false for any other key.
func (l Layout) ParseQuotaEntityKey(key string) (e QuotaEntity, ok bool) {
	rest, ok := strings.CutPrefix(key, l.QuotaEntityPrefix())
	if !ok {
		return QuotaEntity{}, false
	}
	parts := strings.Split(rest, "/")
	for len(parts) >= 2 {
		n, ok := desanitize(parts[1])
		if !ok {
			return QuotaEntity{}, false
		}
		switch {
		case parts[0] == "users" && e.User == nil && e.Client == nil:
			e.User = &n
		case parts[0] == "clients" && e.Client == nil:
			e.Client = &n
		default:
			return QuotaEntity{}, false
		}
		parts = parts[2:]
	}
	return e, len(parts) == 0 && (e.User != nil || e.Client != nil)
}

func sanitize(n QuotaEntityName) string {
	if n.Default {
		return QuotaDefault
	}
	return url.PathEscape(n.Name)
}

func desanitize(s string) (QuotaEntityName, bool) {
	if s == QuotaDefault {
		return QuotaEntityName{Default: true}, true
	}
	n, err := url.PathUnescape(s)
	return QuotaEntityName{Name: n}, err == nil && s != ""
}
