package layout

// UnorderedResponsesFeature is the KIP-584 supported feature (version 1) a
// broker lists in its ApiVersions response when it answers that
// connection's requests as soon as each is ready rather than in request
// order. It is part of the contract between brokers and proxies, beside the
// etcd keys: a proxy multiplexes unrelated clients' requests on one
// connection only to a broker that lists it, and keeps requests that a
// broker may hold for long (fetches, joins) on connections of their own
// otherwise; Apache Kafka (and kfake) answer one request at a time per
// connection. docs/embedding.md says when a broker may list it.
const UnorderedResponsesFeature = "kproxy.unordered-responses"
