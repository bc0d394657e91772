package crypt

import (
	"encoding/binary"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kproxy/kproxy/internal/kwire"
)

// failed counts and logs (at a limited rate) a partition that could not be
// encrypted or decrypted, and returns the code to answer it with:
//   - KMS unavailable: KAFKA_STORAGE_ERROR, which producers and consumers
//     retry (the proxy cannot reach the keys its storage needs), and which
//     tells an idempotent producer that nothing was written;
//   - KMS refused the key on produce: POLICY_VIOLATION, not retriable (the
//     configuration names a key the KMS will not use; passthrough aside);
//   - a fetched record that fails authentication, or whose DEK the KMS
//     refuses, or that cannot be read: CORRUPT_MESSAGE, Kafka's code for
//     stored data that fails its check. Consumers stop at that partition
//     (Java raises it from poll; franz-go retries it) instead of reading on
//     as if it were empty, and the proxy does not retry it;
//   - produced data that cannot be read: CORRUPT_MESSAGE for a bad CRC,
//     INVALID_RECORD otherwise, MESSAGE_TOO_LARGE for a batch that
//     decompresses beyond max_batch_bytes;
//   - the decompression budget of rewrites in flight used up (either
//     way): REQUEST_TIMED_OUT, which clients retry, as produce validation
//     answers for its own budget; nothing was written.
func (s *Service) failed(op, topic string, part int32, err error) int16 {
	reason, code := classifyFailure(op, err)
	s.m.failures.WithLabelValues(op, topic, reason).Inc()
	s.log.Log(op+"/"+reason, "encrypted topic partition answered with an error",
		"op", op, "topic", topic, "partition", part, "code", kerr.ErrorForCode(code).Error(), "err", err)
	return code
}

func classifyFailure(op string, err error) (reason string, code int16) {
	switch {
	case errors.Is(err, ErrUnavailable):
		return "unavailable", kerr.KafkaStorageError.Code
	case errors.Is(err, ErrKeyRefused) && op == "produce":
		return "refused", kerr.PolicyViolation.Code
	case errors.Is(err, ErrKeyRefused):
		return "refused", kerr.CorruptMessage.Code
	case errors.Is(err, ErrAuth):
		return "auth", kerr.CorruptMessage.Code
	case errors.Is(err, errBusy):
		return "busy", kerr.RequestTimedOut.Code
	case errors.Is(err, errMaxBatch):
		return "format", kerr.MessageTooLarge.Code
	case op == "fetch":
		return "format", kerr.CorruptMessage.Code
	}
	return "format", kerr.InvalidRecord.Code
}

// countRecords is the number of records the batches of set claim: what
// their encryption may use of a DEK.
func countRecords(set []byte) int {
	n := 0
	for len(set) >= kwire.BatchHeaderLen {
		total := int(int32(binary.BigEndian.Uint32(set[kwire.BatchOffLength:]))) + kwire.BatchLogOverhead
		if total < kwire.BatchHeaderLen || total > len(set) {
			break
		}
		if c := int32(binary.BigEndian.Uint32(set[kwire.BatchOffNumRecords:])); c > 0 {
			n += int(c)
		}
		set = set[total:]
	}
	return n
}
