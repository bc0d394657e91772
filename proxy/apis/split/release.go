package split

import "github.com/kproxy/kproxy/proxy/upstream"

// Memory of broker answers: a split request's answer may reference the
// brokers' answer frames (fetch record sets, a whole answer passed through),
// so each frame goes back to the Sender's pool only once nothing references
// it: right after a merge that copied from it, or once the client write is
// done (Answer.Release).

// PartsMerger is an Adapter whose answer can leave record sets in the
// brokers' answers (fetch; see vecEncoder).
type PartsMerger interface {
	// MergeParts encodes the answer's skeleton into a buffer from the
	// Env's Bufs and returns it with the answer's pieces; parts is
	// nil when the skeleton is the whole answer, and ok false when the
	// answer must be merged whole.
	MergeParts() (skel *[]byte, parts [][]byte, ok bool)
}

// releaseLater returns the Answer.Release of an answer in buf that may
// still reference the broker answers not released yet.
func (s *Engine) releaseLater(buf *[]byte) func() {
	var held []upstream.Pending
	for si := range s.subs {
		if sb := &s.subs[si]; sb.held {
			sb.held = false
			held = append(held, sb.pending())
		}
	}
	env := s.env
	return func() {
		for _, p := range held {
			p.Release()
		}
		env.putBuf(buf)
	}
}

// releaseAnswers hands back the broker answers the merge copied from.
func (s *Engine) releaseAnswers() {
	for si := range s.subs {
		if sb := &s.subs[si]; sb.held {
			sb.held = false
			sb.pending().Release()
		}
	}
}

// pending is whose answer sb got: its own request's, or an adopted long
// poll's.
func (sb *sub) pending() upstream.Pending {
	if sb.p != nil {
		return sb.p
	}
	return sb.lp.p
}
