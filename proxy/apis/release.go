package apis

// Memory of broker answers: a split request's answer may reference the
// brokers' answer frames (fetch record sets, a whole answer passed through),
// so each frame goes back to the Sender's pool only once nothing references
// it: right after a merge that copied from it, or once the client write is
// done (Reply.Release).

// partsMerger is an adapter whose answer can leave record sets in the
// brokers' answers (fetch; see vecEncoder).
type partsMerger interface {
	// mergeParts encodes the answer's skeleton into a buffer from the
	// dispatcher's pool and returns it with the answer's pieces; parts is
	// nil when the skeleton is the whole answer, and ok false when the
	// answer must be merged whole.
	mergeParts() (skel *[]byte, parts [][]byte, ok bool)
}

// releaseLater returns the Reply.Release of an answer in buf that may
// still reference the broker answers not released yet.
func (s *splitter) releaseLater(buf *[]byte) func() {
	var held []Pending
	for si := range s.subs {
		if sb := &s.subs[si]; sb.held {
			sb.held = false
			held = append(held, sb.pending())
		}
	}
	d := s.d
	return func() {
		for _, p := range held {
			p.Release()
		}
		d.putBuf(buf)
	}
}

// releaseAnswers hands back the broker answers the merge copied from.
func (s *splitter) releaseAnswers() {
	for si := range s.subs {
		if sb := &s.subs[si]; sb.held {
			sb.held = false
			sb.pending().Release()
		}
	}
}

// pending is whose answer sb got: its own request's, or an adopted long
// poll's.
func (sb *sub) pending() Pending {
	if sb.p != nil {
		return sb.p
	}
	return sb.lp.p
}
