package apis

// Produce's record encryption: the record data of each partition of an
// encrypted topic is encrypted after its checks, before it is forwarded;
// other topics' data is not touched (crypt.Service.Encrypted).

import (
	"context"

	"github.com/kproxy/kproxy/proxy/crypt"
)

// encryptRecords encrypts item (ti, pi)'s record data if its topic is
// encrypted, and returns the code to answer the item with, or 0 to
// forward it.
func (o *produceOp) encryptRecords(ctx context.Context, topic string, ti, pi int32) int16 {
	c := o.d.cfg.Encryption
	if c == nil || !c.Encrypted(topic) {
		return 0
	}
	p := &o.req.Topics[ti].Partitions[pi]
	buf := o.d.getBuf(crypt.SizeHint(p.Records))
	out, rewritten, code := c.EncryptChecked(ctx, *buf, topic, p.Partition, p.Records, &o.checked)
	if !rewritten {
		o.d.bufs.Put(buf)
		return code
	}
	*buf = out
	o.encBufs = append(o.encBufs, buf) // given back by release, once nothing sends from them
	p.Records, o.encrypted = out, true
	return 0
}

// whole is the client's body to forward as it is, or nil once encryption
// rewrote record data in the decoded request.
func (o *produceOp) whole(body []byte) []byte {
	if o.encrypted {
		return nil
	}
	return body
}
