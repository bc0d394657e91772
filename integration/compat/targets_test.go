package compat

// defaultTarget is what the matrix runs against without KPROXY_COMPAT_TARGET.
const defaultTarget = "devcluster"

func targetKinds() []targetKind { return []targetKind{devclusterKind, kfakeKind} }
