package compat

// defaultTarget is what the matrix runs against without KPROXY_COMPAT_TARGET.
const defaultTarget = "kfake"

func targetKinds() []targetKind { return []targetKind{kfakeKind} }
