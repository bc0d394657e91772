package split

// subBody encodes sub-request idx into Send's frame: an upstream.VecBody,
// whose pieces only a VecAdapter leaves out.
type subBody struct {
	s     *Engine
	idx   []int32
	nsubs int
	whole []byte // the client's body, forwarded as it is
	sent  int    // bytes the last append wrote (Metrics.Upstream)
}

func (b *subBody) AppendBody(dst []byte) []byte {
	n := len(dst)
	if b.whole != nil {
		dst = append(dst, b.whole...)
	} else {
		dst = b.s.ops.Encode(dst, b.idx, b.nsubs)
	}
	b.sent = len(dst) - n
	return dst
}

// SizeHint: a sub-request is at most about the client's request.
func (b *subBody) SizeHint() int {
	switch {
	case b.whole != nil:
		return len(b.whole)
	case b.s.own != nil:
		return len(b.s.own) + 256
	}
	return 4096
}

func (b *subBody) AppendVec(dst []byte) ([]byte, [][]byte) {
	if b.s.vec == nil {
		return b.AppendBody(dst), nil
	}
	n := len(dst)
	dst, parts := b.s.vec.EncodeVec(dst, b.idx, b.nsubs, b.whole)
	b.sent = len(dst) - n
	for _, p := range parts {
		b.sent += len(p)
	}
	return dst, parts
}

func (b *subBody) VecSizeHint() int {
	if b.s.vec == nil {
		return b.SizeHint()
	}
	return b.s.vec.VecSizeHint(b.idx, b.whole)
}
