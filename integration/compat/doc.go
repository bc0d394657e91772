// Package compat proves that Kafka clients this project did not write work
// unchanged when pointed at kproxy.
//
// The tests drive six clients (franz-go kgo, IBM sarama, segmentio kafka-go,
// confluent-kafka-go, kcat and kafkajs) against a cluster of stub brokers
// behind a proxy (assembly/devcluster) and check, for each client: metadata,
// keyed acks=all produce and an ordered read back from the beginning, a
// two-member consumer group that commits and resumes after a restart, the
// idempotent producer, every compression codec the client supports (the
// stored batches keep the codec they were sent with), a partition whose
// owner vanishes for a broker that is not live (every record answered
// within the client's delivery timeout, then produced again once the
// partition is free), and failover while the broker that owns a partition
// is killed mid-stream.
//
// kcat and kafkajs run as subprocesses (scripts/install-clients.sh installs
// them; kafkajs's driver script is in node/). A full run with
// KPROXY_WRITE_DOCS=1 (`make docs`) writes docs/compatibility.md from the
// results; the file is never edited by hand, and `make test` leaves it alone.
//
// Environment:
//
//	KPROXY_COMPAT_TARGET=devcluster|kfake  what the clients talk to
//	                                      (kfake: franz-go's fake cluster,
//	                                      no proxy, to tell harness bugs
//	                                      from proxy bugs)
//	KPROXY_WRITE_DOCS=1                   write the doc (full runs against
//	                                      the dev cluster only)
//	CI=true                               a missing client fails instead of
//	                                      being skipped
//
// All code lives in _test.go files: nothing here is meant to be imported.
package compat
