// SASL requests that reach the dispatcher, answered ILLEGAL_SASL_STATE: the
// client connection runs SASL exchanges itself (package proxy).

package apis

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// beginSASL answers SaslHandshake and SaslAuthenticate that reach the
// dispatcher: the client connection runs SASL exchanges itself (package
// proxy), so these come on listeners without SASL, and Kafka's request
// handler answers them with ILLEGAL_SASL_STATE.
func (d *Dispatcher) beginSASL(_ context.Context, _ uint64, h Header, body []byte) (op, Reply, error) {
	r, err := d.answerSASL(h, body)
	return nil, r, err
}

func (d *Dispatcher) answerSASL(h Header, body []byte) (Reply, error) {
	req := kmsg.RequestForKey(h.Key)
	req.SetVersion(h.Version)
	if err := req.ReadFrom(body); err != nil {
		return Reply{}, fmt.Errorf("decode: %w", err)
	}
	switch r := req.ResponseKind().(type) {
	case *kmsg.SASLHandshakeResponse:
		r.Version, r.ErrorCode = h.Version, kerr.IllegalSaslState.Code
		return Reply{Body: r.AppendTo(nil)}, nil
	case *kmsg.SASLAuthenticateResponse:
		r.Version, r.ErrorCode = h.Version, kerr.IllegalSaslState.Code
		r.ErrorMessage = kmsg.StringPtr("this listener does not authenticate with SASL")
		return Reply{Body: r.AppendTo(nil)}, nil
	}
	return Reply{}, fmt.Errorf("not a SASL request")
}
