// Package check verifies the deployment files under deploy/ offline: the Helm
// chart renders (with helm's own Go library) with its default values and
// with its TLS example values, every rendered object decodes strictly into
// the Kubernetes API types (an unknown or misspelt field fails), the
// container's flags and config keys are flags of `kproxy serve --help`, and
// the container's command line with the rendered config file starts a proxy
// that syncs from a local etcd (`kproxy etcd`).
//
// It is its own Go module so that helm and the Kubernetes libraries stay out
// of kproxy's dependency graph; `make test` runs it. Its limit: it checks
// shapes and references between objects, not that a cluster accepts them
// (no admission webhooks, no CRD schema for the ServiceMonitor beyond the
// fields the chart uses).
package check
