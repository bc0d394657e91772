// Package kafscale checks kproxy in front of brokers that behave like
// KafScale's (kproxy serve --etcd-layout kafscale). KafScale itself cannot
// be built here, so each test runs franz-go's kfake cluster made to act as
// KafScale does (see emulation in env_test.go): a broker takes a
// partition's etcd lease on the first Produce it gets for it and then
// leads it, serves reads of any partition nobody leases, ignores leader
// epochs, and its keys are written exactly as KafScale writes them
// (leasewatch/kafscale/kafscaletest). kfake's partition leaders are kept
// equal to the lease keys. Real clients (kgo, sarama, kcat, kafkajs) talk
// to the proxy only.
//
// All code lives in _test.go files: nothing here is meant to be imported.
package kafscale
