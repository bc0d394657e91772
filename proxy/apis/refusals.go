package apis

import (
	"github.com/kproxy/kproxy/proxy/apis/answer"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// refuse builds req's response refusing everything it asks about with
// code, as the API's row says (table.go): through its own builder when the
// response names its entries differently from the request, else
// errorResponse.
func refuse(req kmsg.Request, code int16) kmsg.Response {
	if k := req.Key(); k >= 0 && int(k) < numKeys {
		if a := apiTable[k].refusal.answer; a != nil {
			return a(req, code)
		}
	}
	return answer.ErrorResponse(req, code)
}
