// Package kfake checks the proxy's protocol handling against an independent
// Kafka implementation, franz-go's kfake, instead of our own stub broker: the
// stub and the proxy were written by one team and could share a
// misunderstanding of the protocol; kfake could not share it.
//
// Each test starts a real embedded etcd, a three-broker kfake cluster and a
// proxy in-process, then writes the etcd keys of layout so that the proxy
// routes every partition and group to the kfake broker that leads it (the
// role our stub brokers play in production). Real clients (franz-go kgo and
// kadm, IBM sarama) and raw kmsg requests then talk to the proxy only, and
// their answers are compared with what kfake answers when asked directly.
//
// A test that fails here names a proxy behaviour that differs from what an
// independent broker expects; the proxy code is not patched from here.
//
// All code lives in _test.go files: nothing here is meant to be imported.
package kfake
