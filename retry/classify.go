// Package retry decides which failed broker requests the proxy retries, how
// long it waits between attempts, and within which deadline. Only definite
// failures are retried: a request the broker refused before doing anything,
// or one that never left the proxy. A request that may have been processed
// (a timeout, a broken connection after sending) is returned to the client as
// a retriable error, so that the client's own idempotence decides whether a
// retry is safe. Retries always go to a fresh route that avoids the broker
// that just refused (routing.Table.Route's avoid argument).
package retry

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Class is what a request outcome means for retrying.
type Class int

const (
	// Done: no error.
	Done Class = iota
	// Definite: the broker did not process the request (or processing it
	// has no effect); retry on a fresh route.
	Definite
	// Ambiguous: the request may have taken effect; do not retry, answer
	// the client with a retriable error.
	Ambiguous
	// Final: return the answer to the client as it is.
	Final
)

func (c Class) String() string {
	switch c {
	case Done:
		return "done"
	case Definite:
		return "definite"
	case Ambiguous:
		return "ambiguous"
	case Final:
		return "final"
	}
	return "unknown"
}

// Classify says what a Kafka error code in a response to a request means for
// retrying. repeatable is the caller's word that repeating an attempt that
// may have been processed has no further effect for the request's API
// (reads, and Heartbeat; not OffsetCommit: a late repeat could overwrite a
// newer commit): the row of the API in the proxy's table says it, so this
// package names no API. It is a pure function of the table below:
//
//   - NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, NOT_COORDINATOR,
//     COORDINATOR_NOT_AVAILABLE, NOT_CONTROLLER: the broker refused before
//     doing anything (a stub broker checks ownership first): Definite.
//   - REQUEST_TIMED_OUT, NETWORK_EXCEPTION, KAFKA_STORAGE_ERROR: the write
//     may have been committed (a fenced commit can time out after it
//     applied): Ambiguous when not repeatable (Produce, OffsetCommit,
//     JoinGroup, ...), Definite when repeatable (Fetch, ListOffsets,
//     Metadata, OffsetFetch, Heartbeat, ...).
//   - UNKNOWN_LEADER_EPOCH (the client's epoch is newer than the owner's)
//     and FENCED_LEADER_EPOCH (older): Final. Only the owner answers either,
//     so a retry that avoids it would only bounce off NOT_LEADER_OR_FOLLOWER
//     elsewhere; the client refreshes its metadata and retries, as Kafka
//     defines.
//   - UNKNOWN_TOPIC_OR_PARTITION: Final for every API, Produce included.
//     Nothing was written, but every broker reads topics from the same etcd,
//     so another broker would answer the same; clients treat the code as
//     retriable and refresh metadata themselves.
//   - COORDINATOR_LOAD_IN_PROGRESS: Final. The refusing broker is the right
//     coordinator, so a retry that avoids it would only bounce off
//     NOT_COORDINATOR; clients retry it after their own backoff.
//   - Every other code: Final.
func Classify(code int16, repeatable bool) Class {
	switch code {
	case 0:
		return Done
	case kerr.NotLeaderForPartition.Code, kerr.LeaderNotAvailable.Code,
		kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code,
		kerr.NotController.Code:
		return Definite
	case kerr.RequestTimedOut.Code, kerr.NetworkException.Code, kerr.KafkaStorageError.Code:
		if repeatable {
			return Definite
		}
		return Ambiguous
	}
	return Final
}

// retriedCodes are the codes Classify can call Definite, for some request.
var retriedCodes = []int16{
	kerr.NotLeaderForPartition.Code, kerr.LeaderNotAvailable.Code,
	kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code,
	kerr.NotController.Code,
	kerr.RequestTimedOut.Code, kerr.NetworkException.Code, kerr.KafkaStorageError.Code,
}

// RetriedCodes returns every Kafka error code that Classify calls Definite
// for repeatable requests (a superset of those of other requests): the codes a retry can be counted under, so that
// metrics can export them at zero before the first retry.
func RetriedCodes() []int16 { return append([]int16(nil), retriedCodes...) }

// ClassifyErr classifies a transport error from sending a request and
// waiting for its response: an error wrapping ErrNotSent is Definite (no
// byte reached the broker); anything else, a deadline included, is
// Ambiguous, since the broker may have processed the request.
func ClassifyErr(err error) Class {
	switch {
	case err == nil:
		return Done
	case errors.Is(err, ErrNotSent):
		return Definite
	}
	return Ambiguous
}

// IsContextErr reports whether err is the caller's own cancellation or
// deadline, which ends retrying regardless of class.
func IsContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
