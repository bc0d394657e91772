package harness

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/security/aclstore"
	"github.com/kproxy/kproxy/proxy/security/authz"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// The ACL scenarios measure what authorization costs: a second proxy runs
// with --authorizer deny-by-default, so that every request is checked
// against aclBindings bindings in etcd, and is compared with the plain
// proxy (allow-all, no check) on the same workload.
const (
	sideACL     = "kproxy-acl"
	aclBindings = 1000
	// aclTopicPrefix starts every ACL scenario topic (roundTopic adds -rN).
	aclTopicPrefix = "acl-bench-"
	// decisionsMetric counts the ACL proxy's authorization decisions: a
	// run that made none measured nothing.
	decisionsMetric = "kproxy_authz_decisions_total"
	// aclCPUGoal is the most CPU per MB the ACL proxy may take, as a
	// multiple of the plain proxy's.
	aclCPUGoal = 1.05
)

var aclSides = []string{sideProxy, sideACL}

// aclScenarioIDs are the scenarios that run the ACL proxy.
var aclScenarioIDs = []string{"acl-produce-1k", "acl-fetch"}

// aclBindingSet is n valid, distinct bindings (n >= the workload's own): first
// those the bench workload needs as User:ANONYMOUS (a plaintext client),
// then unrelated ones for other principals and resources (literal and
// prefixed topics, groups, denies) so that lookups see a realistic index.
func aclBindingSet(n int) []authz.Binding {
	allow := func(rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, name, who string, op kmsg.ACLOperation) authz.Binding {
		return authz.Binding{
			Pattern: authz.Pattern{Type: rt, PatternType: pt, Name: name},
			Entry:   authz.Entry{Principal: who, Host: authz.Wildcard, Operation: op, Permission: kmsg.ACLPermissionTypeAllow},
		}
	}
	topic, cluster, group := kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeCluster, kmsg.ACLResourceTypeGroup
	lit, pre := kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
	anon := authz.AnonymousUser
	out := []authz.Binding{
		// kbench produces with acks=all, so idempotently: IdempotentWrite on
		// the cluster; metadata needs Describe.
		allow(topic, pre, aclTopicPrefix, anon, kmsg.ACLOperationWrite),
		allow(topic, pre, aclTopicPrefix, anon, kmsg.ACLOperationRead),
		allow(topic, pre, aclTopicPrefix, anon, kmsg.ACLOperationDescribe),
		allow(cluster, lit, authz.ClusterName, anon, kmsg.ACLOperationIdempotentWrite),
		allow(cluster, lit, authz.ClusterName, anon, kmsg.ACLOperationDescribe),
	}
	ops := []kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe}
	for i := 0; len(out) < n; i++ {
		who := fmt.Sprintf("User:svc-%d", i%97)
		op := ops[i%len(ops)]
		var b authz.Binding
		switch i % 5 {
		case 0, 1:
			b = allow(topic, lit, fmt.Sprintf("team-%d.events", i), who, op)
		case 2:
			b = allow(topic, pre, fmt.Sprintf("team-%d.", i), who, op)
		case 3:
			b = allow(group, lit, fmt.Sprintf("svc-%d-consumers", i), who, kmsg.ACLOperationRead)
		default:
			// Denies for the bench's own principal elsewhere: checked on every
			// lookup that reaches the principal, never matching a bench topic.
			b = allow(topic, lit, fmt.Sprintf("audit-%d", i), anon, op)
			b.Permission = kmsg.ACLPermissionTypeDeny
		}
		out = append(out, b)
	}
	return out
}

// startACLProxy writes the bindings and starts the ACL proxy.
func (c *Cluster) startACLProxy(ctx context.Context) error {
	if _, err := aclstore.Create(ctx, c.etcdCli, c.layout, aclBindingSet(aclBindings)); err != nil {
		return err
	}
	return c.startAltProxy(ctx, "--authorizer", authz.DenyByDefault.String())
}

// startAltProxy starts the second proxy of a comparison with flags.
func (c *Cluster) startAltProxy(ctx context.Context, flags ...string) error {
	p, err := c.rig.AddProxy(flags...)
	if err != nil {
		return err
	}
	c.altProxy = p
	return c.rig.StartProxy(ctx, p, len(c.brokers))
}

// stopAltProxy stops the second proxy.
func (c *Cluster) stopAltProxy() {
	c.stopAll(c.altProxy.Proc)
	c.altProxy = nil
}

// aclScenarios run produce-1k and fetch on the plain and the ACL proxy.
func (h *Harness) aclScenarios(ctx context.Context) error {
	if !h.selected(aclScenarioIDs...) {
		return nil
	}
	if err := h.cluster.startACLProxy(ctx); err != nil {
		return fmt.Errorf("start the ACL proxy: %w", err)
	}
	defer h.cluster.stopAltProxy()
	what := fmt.Sprintf("as %%s, on kproxy (allow-all) and kproxy-acl (--authorizer deny-by-default with %d bindings in etcd: %d that let User:ANONYMOUS use the %s* topics and the cluster, the rest for other principals and resources)",
		aclBindings, len(aclBindingSet(0)), aclTopicPrefix)
	if h.selected("acl-produce-1k") {
		if err := h.compareACL(ctx, "acl-produce-1k", "Produce 1 KiB records with 1,000 ACL bindings", fmt.Sprintf(what, "produce-1k"),
			h.freshPlan(aclTopicPrefix+"1k", h.produceFor(produceArgs{recordSize: 1024, producers: 8, clients: 8}))); err != nil {
			return err
		}
	}
	if h.selected("acl-fetch") {
		if err := h.compareACL(ctx, "acl-fetch", "Fetch with 1,000 ACL bindings", fmt.Sprintf(what, "fetch"),
			h.fillPlan(aclTopicPrefix+"fetch")); err != nil {
			return err
		}
	}
	return nil
}

// compareACL runs plan on both proxies and fails if the ACL proxy made no
// authorization decision, or denied the workload.
func (h *Harness) compareACL(ctx context.Context, id, title, what string, plan roundPlan) error {
	admin := h.cluster.altProxy.AdminAddr
	before, err := testrig.ScrapeCounter(ctx, admin, decisionsMetric)
	if err != nil {
		return fmt.Errorf("scenario %s: %w", id, err)
	}
	res, err := h.compareSides(ctx, id, title, what, aclSides, plan)
	if err != nil {
		return err
	}
	after, err := testrig.ScrapeCounter(ctx, admin, decisionsMetric)
	if err != nil {
		return fmt.Errorf("scenario %s: %w", id, err)
	}
	p, _ := res.side(sideProxy)
	a, _ := res.side(sideACL)
	if after-before <= 0 {
		return fmt.Errorf("scenario %s: %s stayed at %.0f on %s: nothing was authorized", id, decisionsMetric, after, sideACL)
	}
	if a.Errors > 0 {
		return fmt.Errorf("scenario %s: %d errors on %s (first: %s): the bindings do not cover the workload", id, a.Errors, sideACL, a.FirstError)
	}
	res.Ratios = []Ratio{
		{"kproxy-acl / kproxy throughput", div(a.RecordsPerSec, p.RecordsPerSec), "x"},
		{"kproxy-acl / kproxy CPU per MB", div(a.IntermediaryCPUMsPerMB, p.IntermediaryCPUMsPerMB), "x"},
		{"kproxy-acl - kproxy p99", float64(a.Latency.P99-p.Latency.P99) / 1000, "ms"},
	}
	res.Notes = append(res.Notes, fmt.Sprintf("kproxy-acl made %.0f authorization decisions (%s) over the scenario, its unmeasured runs included.", after-before, decisionsMetric))
	h.report.Scenarios = append(h.report.Scenarios, res)
	return nil
}

// evaluateACL checks the ACL proxy's CPU per MB against the plain proxy's.
func (r *Report) evaluateACL() {
	for _, id := range aclScenarioIDs {
		r.Targets = append(r.Targets, r.cpuRatioTarget(id, "proxy CPU per MB with 1,000 bindings, "+id,
			fmt.Sprintf("<= %.2f x without", aclCPUGoal), aclCPUGoal, sideACL, sideProxy))
	}
}

// cpuRatioTarget judges scenario id's CPU per MB of the intermediary on
// side num against side den: met when the ratio is at most limit and
// neither side saw an error.
func (r *Report) cpuRatioTarget(id, name, goal string, limit float64, num, den string) Target {
	s, ok := r.scenario(id)
	if !ok {
		return Target{Name: name, Goal: goal, Figure: "-", Status: "not run"}
	}
	a, _ := s.side(num)
	b, _ := s.side(den)
	ratio := div(a.IntermediaryCPUMsPerMB, b.IntermediaryCPUMsPerMB)
	return Target{Name: name, Goal: goal,
		Figure: fmt.Sprintf("%.3f x (%.2f vs %.2f ms/MB; throughput %.2f x)%s", ratio, a.IntermediaryCPUMsPerMB, b.IntermediaryCPUMsPerMB,
			div(a.RecordsPerSec, b.RecordsPerSec), overBy(ratio, limit, "x")),
		Status: status(ratio > 0 && ratio <= limit && a.Errors == 0 && b.Errors == 0)}
}
