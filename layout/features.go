package layout

// UnorderedResponsesFeature is the KIP-584 supported feature (version 1) a
// broker lists in its ApiVersions response when it answers that
// connection's requests as soon as each is ready rather than in request
// order. It is part of the contract between brokers and proxies, beside the
// etcd keys: a proxy multiplexes unrelated clients' requests on one
// connection only to a broker that lists it; otherwise each client
// connection gets broker connections of its own, since Apache Kafka,
// KafScale and kfake work on one request per connection at a time.
// docs/embedding.md says when a broker may list it.
const UnorderedResponsesFeature = "kproxy.unordered-responses"
