package extproc

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// BenchmarkResponsePhase is one streamed request through an EPP on a
// real socket: the request's phase and the end alone (told=false), or
// with its answer of 100 token events told as it comes (told=true).
// cpu-ns/op is the process's CPU time a request, the EPP's (which reads
// each message and answers it) with the client's: an upper bound on what
// the client adds.
func BenchmarkResponsePhase(b *testing.B) {
	const host = "10.0.0.1:8000"
	var pieces [][]byte
	for i := range 100 {
		pieces = append(pieces, fmt.Appendf(nil, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok%d\"}}]}\n\n", i))
	}
	pieces = append(pieces, []byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":100,\"total_tokens\":150}}\n\ndata: [DONE]\n\n"))
	h := http.Header{"Content-Type": {"text/event-stream"}}
	for _, told := range []bool{false, true} {
		b.Run(fmt.Sprintf("told=%v", told), func(b *testing.B) {
			c, _ := serve(b, &recorder{dest: host, quiet: true})
			req := Request{Path: "/v1/chat/completions", Body: []byte(body)}
			b.ReportAllocs()
			start := cpuTime()
			for b.Loop() {
				a, err := c.Ask(context.Background(), req, time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if told {
					piece := a.Tap(200, h, host)
					for _, p := range pieces {
						piece(p, false)
					}
					piece(nil, true)
				}
				a.Done(200, host)
				<-a.replies // the EPP has taken the end
			}
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
