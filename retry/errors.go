package retry

import "errors"

// ErrNotSent marks a failure that happened before any byte of the request
// reached the broker (dial failed, no such broker, pool closed): a definite
// failure, safe to retry elsewhere.
var ErrNotSent = errors.New("request not sent")
