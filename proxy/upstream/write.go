package upstream

// The writer side of a broker connection: its goroutine dials and
// handshakes, then writes queued frames in enqueue order, batched into one
// vectored write, and starts each written request's response deadline. A
// small request that finds nothing queued or being written is written by
// its Send instead (writeInline): one writer at a time either way, so the
// order of enqueue is the order on the wire.

import (
	"container/heap"
	"fmt"
	"net"
	"time"
)

// writeLoop owns the connection's life: dial, handshake, then write batches
// until the connection fails or is closed.
func (c *conn) writeLoop() {
	defer c.bp.p.wg.Done()
	nc, br, kind, err := c.connect()
	if err != nil {
		c.fail(kind, err)
		return
	}
	c.bp.p.wg.Add(1)
	go c.readLoop(br)

	var batch []*wireReq
	for {
		batch = c.takeBatch(batch[:0])
		if batch == nil {
			return
		}
		_, err := c.writeBatch(nc, batch) // what was queued meanwhile, takeBatch takes next
		clear(batch)                      // see writeBatch
		if err != nil {
			c.fail(ioKind(err, kindWrite), fmt.Errorf("write: %w", err))
			return
		}
	}
}

// inlineWriteBytes bounds a request Send writes itself (writeInline): one
// that fits a socket's send buffer, so the write returns at once rather
// than holding the Send's caller.
const inlineWriteBytes = 64 << 10

// writeInline writes r, which enqueue took as the connection's writer
// (c.writing), from the Send's own goroutine. For a small request on an
// idle connection, the common case of a producer's request to a broker
// that answers in order, it saves waking the writer goroutine: on a busy
// machine that wake (a thread woken on the other core) costs more than
// the write. Whatever was queued meanwhile is left to the writer.
func (c *conn) writeInline(nc net.Conn, r *wireReq) {
	batch := [1]*wireReq{r}
	queued, err := c.writeBatch(nc, batch[:])
	if err != nil {
		c.fail(ioKind(err, kindWrite), fmt.Errorf("write: %w", err))
		return
	}
	if queued {
		c.signal()
	}
}

// writeBatch writes batch, taken by its caller as the connection's writer
// (c.writing), in one vectored write, and gives up the writer's place;
// queued tells that requests were queued meanwhile, for the writer
// goroutine.
// The caller clears batch after: the requests live on in its backing
// array until it is overwritten, and each holds its response frame once
// answered, so a batch left as it is pins up to writeBatchBytes of
// answers for as long as the connection lives.
func (c *conn) writeBatch(nc net.Conn, batch []*wireReq) (queued bool, err error) {
	bufs := c.wbufs[:0]
	for _, r := range batch {
		if r.parts != nil {
			bufs = append(bufs, r.parts...)
		} else {
			bufs = append(bufs, *r.frame)
		}
	}
	_ = nc.SetWriteDeadline(time.Now().Add(c.bp.p.cfg.WriteTimeout))
	// WriteTo consumes its receiver, which escapes: a field, not a local,
	// or every write would allocate one.
	c.wvec = bufs
	n, err := c.wvec.WriteTo(nc)
	clear(bufs)
	c.wbufs = bufs
	return c.afterWrite(batch, n), err
}

// takeBatch waits for queued requests and takes up to writeBatchBytes of
// them (at least one). It returns nil once the connection has failed.
func (c *conn) takeBatch(batch []*wireReq) []*wireReq {
	for {
		c.mu.Lock()
		if c.err != nil {
			c.mu.Unlock()
			return nil
		}
		if len(c.queue) > 0 && !c.writing {
			c.writing = true
			size, i := 0, 0
			for ; i < len(c.queue) && (i == 0 || size+c.queue[i].size <= writeBatchBytes); i++ {
				r := c.queue[i]
				size += r.size
				r.state = stWriting
				if r.barrier {
					c.barrierQueued = false // acks=0 requests written after it need another
				}
				batch = append(batch, r)
			}
			rest := copy(c.queue, c.queue[i:])
			clear(c.queue[rest:])
			c.queue = c.queue[:rest]
			c.mu.Unlock()
			return batch
		}
		idleFor := c.idleWaitLocked()
		c.mu.Unlock()
		if idleFor == 0 {
			select {
			case <-c.wake:
			case <-c.dead:
			}
			continue
		}
		if idleFor < 0 {
			if c.closeIfIdle(errIdle) {
				return nil
			}
			continue
		}
		t := time.NewTimer(idleFor)
		select {
		case <-c.wake:
		case <-c.dead:
		case <-t.C:
		}
		t.Stop()
	}
}

// idleWaitLocked is how long the writer may sleep before checking whether
// an idle-closing connection has been idle long enough: 0 for connections
// that never close when idle, negative when it is time to close.
func (c *conn) idleWaitLocked() time.Duration {
	if c.idle <= 0 {
		return 0
	}
	if len(c.inflight) > 0 {
		return c.idle
	}
	if left := c.idle - time.Since(c.idleSince); left > 0 {
		return left
	}
	return -1
}

// afterWrite records which frames of batch were fully written (the first n
// bytes): those may have reached the broker; the rest definitely did not.
// It gives up the writer's place and tells whether requests are queued.
func (c *conn) afterWrite(batch []*wireReq, n int64) (queued bool) {
	now := time.Now()
	var acked []*wireReq
	var off int64
	c.mu.Lock()
	c.writing = false
	for _, r := range batch {
		off += int64(r.size)
		c.bp.p.bufs.Put(r.frame)
		r.frame = nil
		r.giveBack() // the write returned: it reads the parts no more
		switch {
		case r.state != stWriting: // answered already, or failed by the reader
		case off > n:
			r.state = stQueued
		case r.noResp:
			c.wseq++
			r.wseq = c.wseq
			if c.confirms() {
				c.holdUnconfirmedLocked(r)
			} else {
				c.removeLocked(r)
			}
			acked = append(acked, r)
		default:
			c.wseq++
			r.wseq = c.wseq
			r.state, r.deadline = stWritten, c.deadlineLocked(now, r.patience)
			heap.Push(&c.written, r)
		}
	}
	c.armReadDeadlineLocked()
	queued = len(c.queue) > 0
	c.mu.Unlock()
	for _, r := range acked {
		r.complete(nil, nil)
	}
	return queued
}

// deadlineLocked is when a request written at now with the given patience
// must have been answered. A broker that answers in order starts on it only
// after answering everything written before, so while an earlier request
// is unanswered its allowance begins no earlier than the previous
// request's deadline: a long poll or a held JoinGroup ahead of it is not a
// hung broker. Once all are answered the broker starts on it at once.
func (c *conn) deadlineLocked(now time.Time, patience time.Duration) time.Time {
	start := now
	if !c.unordered && len(c.written) > 0 && c.lastDeadline.After(now) {
		start = c.lastDeadline
	}
	c.lastDeadline = start.Add(patience)
	return c.lastDeadline
}
