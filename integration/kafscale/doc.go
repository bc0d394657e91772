// Package kafscale checks kproxy in front of KafScale's brokers (kproxy
// serve --etcd-layout kafscale), two ways.
//
// Against real KafScale (real_*_test.go, TestReal*): two brokers built from
// the source archive KAFSCALE_SRC names, with a local S3 and an embedded
// etcd (testkit/kafscalerig); skipped without KAFSCALE_SRC,
// failed without it under CI=true. Clients of the matrix, a broker killed
// mid-run, a consumer group, a catch-up over drained partitions and the
// watch's scope.
//
// Against an emulation (the other tests): franz-go's kfake cluster made to
// act as KafScale (see emulation in env_test.go): a broker takes a
// partition's etcd lease on the first Produce it gets for it and then
// leads it, serves reads of any partition nobody leases, ignores leader
// epochs, and its keys are written exactly as KafScale writes them
// (leasewatch/kafscale/kafscaletest). kfake's partition leaders are kept
// equal to the lease keys. It stays for what a real broker cannot show:
// which broker each request reached.
//
// Real clients (kgo, sarama, kafka-go, confluent-kafka-go, kcat, kafkajs)
// talk to the proxy only. All code lives in _test.go files: nothing here
// is meant to be imported.
package kafscale
