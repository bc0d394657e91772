package authrule

import (
	"reflect"

	"github.com/kproxy/kproxy/proxy/apis/answer"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Verdict is what a Rule decided about one request.
type Verdict struct {
	Refuse   int16                 // answer the whole request with this code
	Stripped bool                  // entries were removed from the request (re-encode it)
	Empty    bool                  // nothing is left to send: answer locally
	Patch    []func(kmsg.Response) // add local answers to the broker's, in order
}

func (v *Verdict) add(p func(kmsg.Response)) {
	if p != nil {
		v.Patch = append(v.Patch, p)
	}
}

// Rule decides one request type.
type Rule func(g Guard, req kmsg.Request, v *Verdict)

// strip removes from *list the entries code denies (non-zero) and returns
// the patch that adds their answers, built by answer.ErrorResponse, to the
// response's list named field. A list left empty is answered locally.
func strip[Q any](req kmsg.Request, list *[]Q, field string, code func(*Q) int16, v *Verdict) {
	var kept []Q
	byCode := map[int16][]Q{}
	var order []int16
	for i := range *list {
		c := code(&(*list)[i])
		if c == 0 {
			kept = append(kept, (*list)[i])
			continue
		}
		if _, ok := byCode[c]; !ok {
			order = append(order, c)
		}
		byCode[c] = append(byCode[c], (*list)[i])
	}
	if len(order) == 0 {
		return
	}
	var answers []kmsg.Response
	for _, c := range order {
		*list = byCode[c]
		answers = append(answers, answer.ErrorResponse(req, c))
	}
	*list = kept
	v.Stripped, v.Empty = true, len(kept) == 0
	v.add(func(resp kmsg.Response) {
		dst := reflect.ValueOf(resp).Elem().FieldByName(field)
		for _, a := range answers {
			dst.Set(reflect.AppendSlice(dst, reflect.ValueOf(a).Elem().FieldByName(field)))
		}
	})
}

// group and txn codes: 0 when allowed.
func (g Guard) GroupCode(op kmsg.ACLOperation, group string) int16 {
	if g.Allowed(op, kmsg.ACLResourceTypeGroup, group) {
		return 0
	}
	return kerr.GroupAuthorizationFailed.Code
}

func (g Guard) TxnCode(id string) int16 {
	if g.Allowed(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, id) {
		return 0
	}
	return kerr.TransactionalIDAuthorizationFailed.Code
}

func (g Guard) TopicCode(op kmsg.ACLOperation, topic string) int16 {
	if g.Allowed(op, kmsg.ACLResourceTypeTopic, topic) {
		return 0
	}
	return kerr.TopicAuthorizationFailed.Code
}

func (g Guard) ClusterCode(op kmsg.ACLOperation) int16 {
	if g.Cluster(op) {
		return 0
	}
	return kerr.ClusterAuthorizationFailed.Code
}

// first returns the first non-zero code.
func first(codes ...func() int16) int16 {
	for _, c := range codes {
		if code := c(); code != 0 {
			return code
		}
	}
	return 0
}
