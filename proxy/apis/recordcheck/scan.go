// This file is the Produce frame scan: it follows a Produce request's
// layout while the frame's bytes arrive, as far as each partition's record
// batch, and walks the records of every uncompressed batch (walker) while
// the read has just put them in the cache, instead of after the frame is
// read, when a frame of megabytes has left it.
//
// What it finds is a hint: a verdict counts only for exactly the bytes and
// count it was reached on (Arrival.walked), so a scan that lost its way
// could cost a walk, never change one. A frame it cannot follow (not a
// Produce from v3 to v13, a field out of range) is walked after it is read,
// as before.

package recordcheck

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
)

// scanMaxVersion is the last Produce version whose layout the scan knows
// (v13: topics by id); a later one is walked after it is read.
const scanMaxVersion = 13

// maxWalks bounds the verdicts one frame keeps (24 bytes each, with the
// Arrival they stay in its pool): the partitions past it are walked after
// the frame is read.
const maxWalks = 4096

// walked is the verdict of the walk of data off..off+n, count records.
type walked struct {
	off, n int
	count  int32
	res    Reason
}

type scanStep uint8

const (
	scanHeader     scanStep = iota // request header up to the client id
	scanHeaderTags                 // the header's tagged fields (flexible versions)
	scanTxnID
	scanTopics // the topic array's length
	scanTopic  // a topic's name, or its id from v13
	scanParts  // a partition array's length
	scanPart   // a partition's index and the length of its records
	scanBatch  // the batch header
	scanWalk   // the batch's records
	scanPartTags
	scanTopicTags
	scanDone // nothing more to find in this frame
)

// scan is where the scan of one frame stands: the next field starts at
// pos, which may lie past the bytes arrived (a skipped string or records).
type scan struct {
	step          scanStep
	pos           int
	version       int16
	topics, parts int32 // left in the arrays being read, the current one included
	recEnd        int   // where the current partition's records end
	data, dataEnd int   // the current batch's records
	w             walker
	walks         []walked
}

// flexible reports whether the frame's version has compact lengths and
// tagged fields (Produce v9 on).
func (s *scan) flexible() bool { return s.version >= 9 }

// reset starts the scan of a new frame, keeping the verdicts' memory.
func (s *scan) reset() { *s = scan{walks: s.walks[:0]} }

// advance goes on through d, the frame's bytes arrived so far.
func (s *scan) advance(d []byte) {
	for s.step != scanDone && s.next(d) {
	}
}

// next reads the field at pos if d holds it; false when it must wait.
func (s *scan) next(d []byte) bool {
	switch s.step {
	case scanHeader:
		return s.header(d)
	case scanHeaderTags:
		return s.tags(d, scanTxnID)
	case scanTxnID:
		n, p, st := s.length(d, s.pos, 2)
		if st == ready {
			s.pos, s.step = p+max(n, 0)+6, scanTopics // acks and timeout after it
		}
		return s.settle(st)
	case scanTopics, scanParts:
		return s.array(d)
	case scanTopic:
		return s.topic(d)
	case scanPart:
		return s.part(d)
	case scanBatch:
		return s.batch(d)
	case scanWalk:
		s.w.advance(d[s.data:min(len(d), s.dataEnd)])
		if !s.w.done {
			return false
		}
		s.walks = append(s.walks, walked{off: s.data, n: s.dataEnd - s.data, count: s.w.count, res: s.w.res})
		s.endPart()
		return true
	case scanPartTags:
		return s.tags(d, scanPart)
	case scanTopicTags:
		return s.tags(d, scanTopic)
	}
	return false
}

// header reads the request header's fixed fields and skips the client id.
func (s *scan) header(d []byte) bool {
	if len(d) < 10 {
		return false
	}
	be := binary.BigEndian
	key, version := int16(be.Uint16(d)), int16(be.Uint16(d[2:]))
	n := int16(be.Uint16(d[8:]))
	if key != int16(kmsg.Produce) || version < 3 || version > scanMaxVersion || n < -1 {
		s.step = scanDone
		return false
	}
	s.version = version
	s.pos, s.step = 10+max(int(n), 0), scanTxnID
	if s.flexible() {
		s.step = scanHeaderTags
	}
	return true
}

// array reads the length of the topic or partition array at pos.
func (s *scan) array(d []byte) bool {
	n, p, st := s.length(d, s.pos, 4)
	if st != ready {
		return s.settle(st)
	}
	if n < 0 || n == 0 && s.step == scanTopics {
		s.step = scanDone // null, or no topics: nothing to walk
		return false
	}
	s.pos = p
	if n == 0 { // a topic without partitions: past it
		s.endTopic()
		return true
	}
	if s.step == scanTopics {
		s.topics, s.step = int32(n), scanTopic
	} else {
		s.parts, s.step = int32(n), scanPart
	}
	return true
}

// topic skips a topic's name (or id).
func (s *scan) topic(d []byte) bool {
	if s.version >= 13 {
		s.pos, s.step = s.pos+16, scanParts
		return true
	}
	n, p, st := s.length(d, s.pos, 2)
	if st == ready {
		s.pos, s.step = p+max(n, 0), scanParts
	}
	return s.settle(st)
}

// part reads a partition's index and the length of its records.
func (s *scan) part(d []byte) bool {
	n, p, st := s.length(d, s.pos+4, 4)
	if st != ready {
		return s.settle(st)
	}
	s.pos, s.recEnd, s.step = p, p+max(n, 0), scanBatch
	if n < kwire.BatchHeaderLen {
		s.endPart() // no batch whose records could be walked
	}
	return true
}

// batch reads the header of the batch at pos and starts its walk when it is
// one walk would be asked for: magic 2, uncompressed, within the records.
func (s *scan) batch(d []byte) bool {
	if len(d) < s.pos+kwire.BatchHeaderLen {
		return false
	}
	be := binary.BigEndian
	h := d[s.pos:]
	length := int(int32(be.Uint32(h[kwire.BatchOffLength:])))
	count := int32(be.Uint32(h[kwire.BatchOffNumRecords:]))
	codec := be.Uint16(h[kwire.BatchOffAttributes:]) & kwire.BatchAttrCodec
	end := s.pos + kwire.BatchOffLength + 4 + length
	if h[kwire.BatchOffMagic] != 2 || codec != codecNone || count <= 0 ||
		end < s.pos+kwire.BatchHeaderLen || end > s.recEnd || len(s.walks) == maxWalks {
		s.endPart()
		return true
	}
	s.data, s.dataEnd = s.pos+kwire.BatchHeaderLen, end
	s.w = newWalker(count, end-s.data)
	s.step = scanWalk
	return true
}

// endPart moves past the current partition's records.
func (s *scan) endPart() {
	s.pos = s.recEnd
	if s.flexible() {
		s.step = scanPartTags
		return
	}
	s.nextPart()
}

// nextPart moves to the next partition, or past the topic after its last.
func (s *scan) nextPart() {
	if s.parts--; s.parts > 0 {
		s.step = scanPart
		return
	}
	s.endTopic()
}

// endTopic moves past the current topic's partitions: to its tagged
// fields, or to the next topic.
func (s *scan) endTopic() {
	if s.flexible() {
		s.step = scanTopicTags
		return
	}
	s.nextTopic()
}

func (s *scan) nextTopic() {
	if s.topics--; s.topics > 0 {
		s.step = scanTopic
		return
	}
	s.step = scanDone
}

// tags skips the tagged fields at pos (all of them must have arrived),
// then goes on to then.
func (s *scan) tags(d []byte, then scanStep) bool {
	n, p, st := readUvarint(d, s.pos)
	for i := uint32(0); st == ready && i < n; i++ {
		var size uint32
		if _, p, st = readUvarint(d, p); st == ready { // the tag
			size, p, st = readUvarint(d, p)
			p += int(size)
		}
	}
	if st == ready && p > len(d) {
		st = waiting // a tag's bytes
	}
	if st != ready {
		return s.settle(st)
	}
	s.pos = p
	switch then {
	case scanPart: // after a partition's tags
		s.nextPart()
	case scanTopic: // after a topic's tags
		s.nextTopic()
	default:
		s.step = then
	}
	return true
}

// status is what reading a field found.
type status uint8

const (
	ready   status = iota
	waiting        // d ends inside the field
	broken         // no Produce could hold it: the scan stops
)

// settle is next's answer for a field read with st.
func (s *scan) settle(st status) bool {
	if st == broken {
		s.step = scanDone
	}
	return st == ready
}

// length reads the length at p of a string, bytes or array: a compact one
// (an unsigned varint of length+1, 0 for null) in flexible versions, else
// a big-endian integer of width bytes (2 for strings, 4 for bytes and
// arrays). Null is -1.
func (s *scan) length(d []byte, p, width int) (int, int, status) {
	if s.flexible() {
		u, p, st := readUvarint(d, p)
		if st == ready && u > 1<<31 {
			st = broken
		}
		return int(u) - 1, p, st
	}
	if len(d) < p+width {
		return 0, p, waiting
	}
	if width == 2 {
		return int(int16(binary.BigEndian.Uint16(d[p:]))), p + 2, ready
	}
	return int(int32(binary.BigEndian.Uint32(d[p:]))), p + 4, ready
}

// readUvarint reads the unsigned varint (at most 5 bytes) at p.
func readUvarint(d []byte, p int) (uint32, int, status) {
	u, next, ok := uvarint(d, p)
	switch {
	case ok:
		return u, next, ready
	case next >= len(d): // cut short; a varint too long at the end is found so once more arrives
		return 0, next, waiting
	}
	return 0, next, broken
}
