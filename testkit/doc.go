// Package testkit holds no code of its own: its sub-packages are the tools
// that only tests, benches and the fault suite use (process rigs, a fault
// injecting relay, hostile clients, progress lines, a SCRAM client for
// sarama, the version table of KafScale's brokers). The product binary links none of them (cmd/kproxy's
// TestProductLinksNoTestCode), and they import no integration or bench
// package. Its test checks the import direction of the whole module.
package testkit
