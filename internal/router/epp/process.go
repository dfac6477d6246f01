package epp

// One Process stream: one request, its headers held until its body has
// ended (the model is in the body), then picked for by the router and
// answered with the endpoints, the body rewritten, or an immediate error;
// then its answer's headers and chunks, passed back as they came, which
// the router reads for the first token, the gaps and the usage.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/admission"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/extproc"
)

// exchange is one Process stream's request, from its headers to its
// answer's end. Only the stream's handler goroutine touches it.
type exchange struct {
	s      *Server
	ext    router.External
	body   []byte
	hasHdr bool           // the request's headers are in
	picked *router.Picked // nil before the pick, and after End
}

// Process serves one stream: see the top of the file. A request's body
// must arrive within BodyTimeout of its headers, or it is answered 408.
func (s *Server) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	ctx := stream.Context()
	// Standard unless the headers name another class, even where a
	// proxy sends a body without them.
	x := &exchange{s: s, ext: router.External{Class: admission.Standard, Fallbacks: s.opts.Fallbacks}}
	defer x.end(false)
	msgs := make(chan *extprocv3.ProcessingRequest)
	failed := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				failed <- err
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	var deadline <-chan time.Time
	for {
		select {
		case m := <-msgs:
			out, done := x.handle(ctx, m)
			for _, o := range out {
				if err := stream.Send(o); err != nil {
					return err
				}
			}
			if done {
				return nil
			}
			if x.hasHdr && x.picked == nil && deadline == nil {
				t := time.NewTimer(s.opts.BodyTimeout)
				defer t.Stop()
				deadline = t.C
			}
		case <-deadline:
			if x.picked == nil {
				return stream.Send(immediate(openai.BodyTimedOut()))
			}
		case err := <-failed:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-ctx.Done():
			return nil
		}
	}
}

// handle answers one message; done reports that the stream is over (an
// immediate answer was given).
func (x *exchange) handle(ctx context.Context, m *extprocv3.ProcessingRequest) (out []*extprocv3.ProcessingResponse, done bool) {
	switch r := m.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		x.requestHeaders(r.RequestHeaders, m.MetadataContext)
		if r.RequestHeaders.EndOfStream {
			return x.pick(ctx)
		}
	case *extprocv3.ProcessingRequest_RequestBody:
		if int64(len(x.body)+len(r.RequestBody.Body)) > x.s.opts.MaxBodyBytes {
			return []*extprocv3.ProcessingResponse{immediate(openai.TooLarge(x.s.opts.MaxBodyBytes))}, true
		}
		x.body = append(x.body, r.RequestBody.Body...)
		if r.RequestBody.EndOfStream {
			return x.pick(ctx)
		}
	case *extprocv3.ProcessingRequest_RequestTrailers:
		out = append(out, &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}})
		if x.picked == nil {
			o, d := x.pick(ctx)
			return append(o, out...), d
		}
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		x.responseHeaders(r.ResponseHeaders, m.MetadataContext)
		out = append(out, &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}})
		if r.ResponseHeaders.EndOfStream {
			x.end(true)
		}
	case *extprocv3.ProcessingRequest_ResponseBody:
		b := r.ResponseBody
		if x.picked != nil {
			x.picked.Chunk(b.Body)
		}
		out = append(out, streamed(false, b.Body, b.EndOfStream))
		if b.EndOfStream {
			x.end(true)
		}
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		out = append(out, &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}})
		x.end(true)
	}
	return out, false
}

// requestHeaders reads what the request's headers tell: its path, the
// protocol's headers, and the subset in md.
func (x *exchange) requestHeaders(h *extprocv3.HttpHeaders, md *corev3.Metadata) {
	x.hasHdr = true
	x.ext.Header = make(http.Header, len(h.GetHeaders().GetHeaders()))
	for _, hv := range h.GetHeaders().GetHeaders() {
		v := headerValue(hv)
		switch k := strings.ToLower(hv.Key); k {
		case ":path":
			x.ext.Path, _, _ = strings.Cut(v, "?")
		case extproc.ObjectiveHeader:
			if c, ok := admission.ClassNamed(v); ok {
				x.ext.Class = c
			}
		case extproc.FairnessHeader:
			if p, err := tenant.ParsePath(v); err == nil {
				x.ext.Tenant = p
			}
		case extproc.RewriteHeader:
			x.ext.Model = v
		default:
			if !strings.HasPrefix(k, ":") {
				x.ext.Header.Add(k, v)
			}
		}
	}
	x.ext.Subset = subset(md)
}

// hvLookup is the value of header k in h, "" when it has none.
func hvLookup(h *extprocv3.HttpHeaders, k string) string {
	for _, hv := range h.GetHeaders().GetHeaders() {
		if strings.EqualFold(hv.Key, k) {
			return headerValue(hv)
		}
	}
	return ""
}

// headerValue is hv's value, which a proxy sends as raw bytes or as a
// string.
func headerValue(hv *corev3.HeaderValue) string {
	if len(hv.RawValue) > 0 {
		return string(hv.RawValue)
	}
	return hv.Value
}

// subset is the host:port list of md's subset hint: nil when it has none,
// empty when it names none. A value is a list of strings, or one string
// of them joined by commas.
func subset(md *corev3.Metadata) []string {
	ns, ok := md.GetFilterMetadata()[extproc.SubsetNamespace]
	if !ok {
		return nil
	}
	v, ok := ns.GetFields()[extproc.SubsetKey]
	if !ok {
		return nil
	}
	out := []string{}
	add := func(s string) {
		for _, e := range strings.Split(s, ",") {
			if e = strings.TrimSpace(e); e != "" {
				out = append(out, e)
			}
		}
	}
	switch k := v.Kind.(type) {
	case *structpb.Value_StringValue:
		add(k.StringValue)
	case *structpb.Value_ListValue:
		for _, e := range k.ListValue.GetValues() {
			add(e.GetStringValue())
		}
	}
	return out
}

// pick asks the router for the request's endpoints once its body is in,
// and answers its headers and its body, or with an immediate error.
func (x *exchange) pick(ctx context.Context) ([]*extprocv3.ProcessingResponse, bool) {
	x.ext.Body = x.body
	pk, err := x.s.opts.Router.Pick(ctx, x.ext)
	if err != nil {
		return []*extprocv3.ProcessingResponse{immediate(err)}, true
	}
	x.picked = pk
	dest := strings.Join(pk.Endpoints, ",")
	set := []*corev3.HeaderValueOption{
		{Header: &corev3.HeaderValue{Key: extproc.DestinationHeader, RawValue: []byte(dest)}},
		{Header: &corev3.HeaderValue{Key: "content-length", RawValue: strconv.AppendInt(nil, int64(len(pk.Body)), 10)}},
	}
	headers := &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{
			Response: &extprocv3.CommonResponse{ClearRouteCache: true, HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: set}},
		}},
		DynamicMetadata: destinationMetadata(dest),
	}
	return []*extprocv3.ProcessingResponse{headers, streamed(true, pk.Body, true)}, false
}

// destinationMetadata is the dynamic metadata naming dest.
func destinationMetadata(dest string) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		extproc.DestinationNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			extproc.DestinationHeader: structpb.NewStringValue(dest),
		}}),
	}}
}

// responseHeaders tells the router the answer's status and the endpoint
// the proxy reports it was served by.
func (x *exchange) responseHeaders(h *extprocv3.HttpHeaders, md *corev3.Metadata) {
	if x.picked == nil {
		return
	}
	if v, ok := md.GetFilterMetadata()[extproc.DestinationNamespace].GetFields()[extproc.ServedKey]; ok {
		x.picked.Served(v.GetStringValue())
	}
	status, _ := strconv.Atoi(hvLookup(h, ":status"))
	if status == 0 {
		status = http.StatusOK
	}
	x.picked.Headers(status)
}

// end ends the request picked for, if any: complete reports whether its
// answer reached its end.
func (x *exchange) end(complete bool) {
	if x.picked != nil {
		x.picked.End(complete)
		x.picked = nil
	}
}

// streamed is a body chunk passed on: the request's (the rewritten body)
// or the answer's.
func streamed(request bool, body []byte, eos bool) *extprocv3.ProcessingResponse {
	br := &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
		Mutation: &extprocv3.BodyMutation_StreamedResponse{StreamedResponse: &extprocv3.StreamedBodyResponse{Body: body, EndOfStream: eos}},
	}}}
	if request {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: br}}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: br}}
}

// immediate is the answer that ends a request with err's status and
// OpenAI error body, and its Retry-After when it has one.
func immediate(err error) *extprocv3.ProcessingResponse {
	e := openai.AsError(err)
	set := []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "content-type", RawValue: []byte("application/json")}}}
	if e.RetryAfterSeconds > 0 {
		set = append(set, &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: "retry-after", RawValue: strconv.AppendInt(nil, int64(e.RetryAfterSeconds), 10)}})
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
		Status:  &typev3.HttpStatus{Code: typev3.StatusCode(e.Status)},
		Headers: &extprocv3.HeaderMutation{SetHeaders: set},
		Body:    e.Body(),
	}}}
}
