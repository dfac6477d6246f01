package h1

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// servers runs a benchmark against this package's server and net/http's,
// side by side.
func servers(b *testing.B, h http.Handler, bench func(b *testing.B, addr string)) {
	for _, name := range []string{"h1", "net-http"} {
		b.Run(name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			if name == "h1" {
				s := &Server{Handler: h}
				go s.Serve(ln)
				defer s.Close()
			} else {
				s := &http.Server{Handler: h}
				go s.Serve(ln)
				defer s.Close()
			}
			bench(b, ln.Addr().String())
		})
	}
}

// BenchmarkRequest is one small JSON request and answer on a kept-alive
// connection.
func BenchmarkRequest(b *testing.B) {
	answer := []byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"message":{"role":"assistant","content":"Hi"}}]}`)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(answer)))
		w.Write(answer)
	})
	body := `{"model":"m","messages":[{"role":"user","content":"Hello"}]}`
	req := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	servers(b, h, func(b *testing.B, addr string) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		b.ReportAllocs()
		for b.Loop() {
			io.WriteString(conn, req)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

// BenchmarkOpenStreams holds streams open — each has had its first event
// and waits for the next — and reports the memory the process holds for
// each: heap and goroutine stacks, after a collection, clients included.
func BenchmarkOpenStreams(b *testing.B) {
	const streams = 500
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	req := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
	servers(b, h, func(b *testing.B, addr string) {
		var total float64
		for b.Loop() {
			before := inUse()
			conns := make([]net.Conn, streams)
			for i := range conns {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					b.Fatal(err)
				}
				io.WriteString(c, req)
				buf := make([]byte, 512)
				if n, err := c.Read(buf); err != nil || !strings.Contains(string(buf[:n]), "data:") {
					b.Fatalf("first event: %q, %v", buf[:n], err)
				}
				conns[i] = c
			}
			total += float64(inUse()) - float64(before)
			for _, c := range conns {
				c.Close()
			}
		}
		b.ReportMetric(total/float64(b.N)/streams, "B/stream")
	})
	close(release)
}

// inUse is the heap and stacks in use, after two collections: the second
// shrinks the stacks the first found oversized.
func inUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}
