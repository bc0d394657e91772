package listener

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// rejectMidReauth is the reason label of a request sent between the steps
// of a re-authentication.
const rejectMidReauth = "request_during_reauthentication"

// midReauth refuses a request other than SaslHandshake and
// SaslAuthenticate sent between the steps of a re-authentication (KIP-368):
// the old principal's proof is being replaced and the new one is not yet
// given, so Kafka closes the connection (IllegalSaslStateException), where
// serving it would run it under the old principal.
func midReauth(key int16) error {
	name := kmsg.NameForKey(key)
	if name == "" {
		name = "Unknown"
	}
	return &Refused{rejectMidReauth, fmt.Errorf("%s during re-authentication", name)}
}
