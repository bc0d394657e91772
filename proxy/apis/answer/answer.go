// Package answer builds Kafka responses from requests without a hand-written
// schema per API: a response failing everything a request asked about
// (ErrorResponse, by reflection over kmsg's generated types), the refusals
// of APIs whose responses name their entries differently, and the first
// retryable code of a response. It promises an answer for every entry the
// request named; its limit: it knows nothing of routing or of which API is
// which (callers say whether an API is repeatable).
package answer

import (
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/retry"
)

// ErrorResponse builds req's response, at req's version, that fails
// everything req asked about with code: the top-level error code is set and
// every list in the request (topics, partitions, groups, resources) is
// mirrored into the response with its names copied and its error code set,
// so clients find an answer for each thing they asked about. It is for the
// rare paths (unsupported versions, no broker, ambiguous admin writes); it
// uses reflection over kmsg's generated types, never hand-written schemas.
func ErrorResponse(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	mirror(reflect.ValueOf(req).Elem(), reflect.ValueOf(resp).Elem(), code, 0)
	return resp
}

// MaxDepth is how deep ErrorResponse and DefiniteCode follow nested lists
// (kmsg nests topics, partitions and their entries well within it).
const MaxDepth = 6

func mirror(src, dst reflect.Value, code int16, depth int) {
	setCode(dst, code)
	if depth >= MaxDepth {
		return
	}
	dt := dst.Type()
	for i := range dt.NumField() {
		df := dst.Field(i)
		if sf := src.FieldByName(dt.Field(i).Name); sf.IsValid() {
			mirrorList(sf, df, code, depth)
		}
	}
}

// mirrorList answers each entry of the request list src in the response
// list dst (a struct list; anything else is left alone).
func mirrorList(sf, df reflect.Value, code int16, depth int) {
	if df.Kind() != reflect.Slice || df.Type().Elem().Kind() != reflect.Struct || sf.Kind() != reflect.Slice {
		return
	}
	out := reflect.MakeSlice(df.Type(), sf.Len(), sf.Len())
	for j := range sf.Len() {
		de, se := out.Index(j), sf.Index(j)
		if m := de.Addr().MethodByName("Default"); m.IsValid() {
			m.Call(nil)
		}
		if se.Kind() == reflect.Struct {
			copySame(se, de)
			mirror(se, de, code, depth+1)
		} else {
			// An entry named by a string or an integer ([]string
			// groups, []int32 partitions) is answered too: its name
			// copied, its code set.
			setFirstOfType(de, se)
			setCode(de, code)
		}
	}
	df.Set(out)
}

// Renamed is the refusal builder of an API whose response lists answer
// request lists of another name: pairs are response field, request field.
func Renamed(pairs ...string) func(kmsg.Request, int16) kmsg.Response {
	return func(req kmsg.Request, code int16) kmsg.Response {
		resp := ErrorResponse(req, code)
		src, dst := reflect.ValueOf(req).Elem(), reflect.ValueOf(resp).Elem()
		for i := 0; i+1 < len(pairs); i += 2 {
			// A list the request's version does not carry is empty: it
			// must not replace the answer of the list it does.
			if sf := src.FieldByName(pairs[i+1]); sf.Len() > 0 {
				mirrorList(sf, dst.FieldByName(pairs[i]), code, 0)
			}
		}
		return resp
	}
}

func setCode(v reflect.Value, code int16) {
	if f := v.FieldByName("ErrorCode"); f.IsValid() && f.Kind() == reflect.Int16 {
		f.SetInt(int64(code))
	}
}

// copySame copies the scalar fields src and dst share by name and type.
func copySame(src, dst reflect.Value) {
	st := src.Type()
	for i := range st.NumField() {
		f := st.Field(i)
		if f.Name == "UnknownTags" || f.Name == "ErrorCode" {
			continue
		}
		switch f.Type.Kind() {
		case reflect.Slice, reflect.Map, reflect.Struct:
			continue
		}
		if df := dst.FieldByName(f.Name); df.IsValid() && df.Type() == f.Type && df.CanSet() {
			df.Set(src.Field(i))
		}
	}
}

// setFirstOfType sets dst's first field of v's type, or else its first
// pointer to v's type (DeleteTopics v0-5 names topics *string in answers).
func setFirstOfType(dst, v reflect.Value) {
	for i := range dst.NumField() {
		if f := dst.Field(i); f.Type() == v.Type() && f.CanSet() {
			f.Set(v)
			return
		}
	}
	for i := range dst.NumField() {
		if f := dst.Field(i); f.Kind() == reflect.Pointer && f.Type().Elem() == v.Type() && f.CanSet() {
			p := reflect.New(v.Type())
			p.Elem().Set(v)
			f.Set(p)
			return
		}
	}
}

// DefiniteCode returns the first error code in resp that retry classifies
// as Definite for a request that is repeatable or not (a refusal: not the coordinator, not the
// controller), or 0. Admin and group responses are small; reflection keeps
// this one function for every shape.
func DefiniteCode(repeatable bool, resp kmsg.Response) int16 {
	return walkCodes(repeatable, reflect.ValueOf(resp).Elem(), 0)
}

func walkCodes(rep bool, v reflect.Value, depth int) int16 {
	if f := v.FieldByName("ErrorCode"); f.IsValid() && f.Kind() == reflect.Int16 {
		if c := int16(f.Int()); c != 0 && retry.Classify(c, rep) == retry.Definite {
			return c
		}
	}
	if depth >= MaxDepth {
		return 0
	}
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() != reflect.Slice || f.Type().Elem().Kind() != reflect.Struct {
			continue
		}
		for j := range f.Len() {
			if c := walkCodes(rep, f.Index(j), depth+1); c != 0 {
				return c
			}
		}
	}
	return 0
}
