package proxy

// The differential test of parseHead: whatever head it takes,
// http.ReadResponse must take too and read the same way — the status,
// the headers, the framing and its length, whether the connection
// closes, and where the head ends. A head parseHead leaves is read by
// http.ReadResponse itself, so the two refuse the same heads.

import (
	"bufio"
	"bytes"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// headSeeds are heads upstreams send, and near misses of them.
var headSeeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Mon, 07 Dec 2026 21:00:00 GMT\r\nContent-Length: 12\r\n\r\n{\"ok\":true}\n",
	"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\ndate: x\r\nserver: uvicorn\r\ncontent-length: 0\r\n\r\n",
	"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: 2\r\n\r\n{}",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length:  2 \t\r\nX-A:\r\nx-b: 1\r\nX-B: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n folded\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
	"HTTP/1.1 204 No Content\r\nContent-Length: 2\r\n\r\n",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1  200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 999 x\r\nX-Ünicode: 1\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 2\r\n\r\nok",
}

// headMethods are the methods a fuzz input's request may have.
var headMethods = []string{http.MethodPost, http.MethodGet, http.MethodHead}

func FuzzHeadMatchesNetHTTP(f *testing.F) {
	for i, s := range headSeeds {
		f.Add([]byte(s), uint8(i))
	}
	f.Fuzz(func(t *testing.T, b []byte, method uint8) {
		if len(b) > 8<<10 {
			return
		}
		req := &http.Request{Method: headMethods[int(method)%len(headMethods)]}
		got, n, ok := parseHead(b, req)
		if !ok {
			return
		}
		br := bufio.NewReaderSize(bytes.NewReader(b), len(b)+16)
		want, err := http.ReadResponse(br, req)
		if err != nil {
			t.Fatalf("parseHead took %q, which http.ReadResponse refuses: %v", b, err)
		}
		if consumed := len(b) - br.Buffered(); n != consumed {
			t.Errorf("the head of %q ends at %d, not %d as for http.ReadResponse", b, n, consumed)
		}
		compareAnswers(t, b, got, want)
	})
}

// compareAnswers fails t where got, parseHead's reading of b, is not
// want, http.ReadResponse's.
func compareAnswers(t *testing.T, b []byte, got, want *http.Response) {
	t.Helper()
	type reading struct {
		Status                     string
		StatusCode                 int
		Proto                      string
		ProtoMajor, ProtoMinor     int
		Header                     http.Header
		ContentLength              int64
		TransferEncoding           []string
		Close, NoBody, HasTrailers bool
		Request                    *http.Request
	}
	read := func(r *http.Response) reading {
		return reading{r.Status, r.StatusCode, r.Proto, r.ProtoMajor, r.ProtoMinor, r.Header,
			r.ContentLength, r.TransferEncoding, r.Close, r.Body == http.NoBody, r.Trailer != nil, r.Request}
	}
	if g, w := read(got), read(want); !reflect.DeepEqual(g, w) {
		t.Errorf("%q:\nparseHead          %+v\nhttp.ReadResponse  %+v", b, g, w)
	}
}

// TestParseHead has parseHead take the heads it is for, and leave the
// rest to http.ReadResponse.
func TestParseHead(t *testing.T) {
	post := &http.Request{Method: http.MethodPost}
	for _, s := range headSeeds {
		b := []byte(s)
		got, n, ok := parseHead(b, post)
		if !ok {
			continue
		}
		br := bufio.NewReaderSize(bytes.NewReader(b), len(b)+16)
		want, err := http.ReadResponse(br, post)
		if err != nil {
			t.Fatalf("parseHead took %q, which http.ReadResponse refuses: %v", s, err)
		}
		if consumed := len(b) - br.Buffered(); n != consumed {
			t.Errorf("the head of %q ends at %d, not %d", s, n, consumed)
		}
		compareAnswers(t, b, got, want)
	}
	for _, tc := range []struct {
		head string
		take bool
	}{
		{headSeeds[0], true},
		{headSeeds[1], true},
		{headSeeds[2], true},
		{headSeeds[3], true},
		{headSeeds[8], true},
		{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", false}, // not all buffered
		{headSeeds[4], false},                               // two lengths
		{headSeeds[5], false},                               // length and chunks
		{headSeeds[9], false},                               // folded
		{headSeeds[11], false},                              // Connection
		{headSeeds[12], false},                              // bare LF
		{headSeeds[13], false},                              // 204
		{headSeeds[14], false},                              // 1xx
		{headSeeds[15], false},                              // HTTP/1.0
		{headSeeds[18], false},                              // not ASCII
		{strings.Replace(headSeeds[0], "12", "0012345678901234567", 1), false}, // 19 digits
	} {
		if _, _, ok := parseHead([]byte(tc.head), post); ok != tc.take {
			t.Errorf("parseHead(%q) took it: %v, want %v", tc.head, ok, tc.take)
		}
	}
	if _, _, ok := parseHead([]byte(headSeeds[0]), &http.Request{Method: http.MethodHead}); ok {
		t.Error("parseHead took an answer to HEAD")
	}
}

// BenchmarkParseHead compares parseHead with http.ReadResponse on an
// answer's head as llmgw's sim sends it.
func BenchmarkParseHead(b *testing.B) {
	head := []byte(headSeeds[0])
	req := &http.Request{Method: http.MethodPost}
	b.Run("parseHead", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok := parseHead(head, req); !ok {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("ReadResponse", func(b *testing.B) {
		b.ReportAllocs()
		br := bufio.NewReaderSize(nil, connBufSize)
		for b.Loop() {
			br.Reset(bytes.NewReader(head))
			if _, err := http.ReadResponse(br, req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestSameLength has the upstream's Content-Length value passed on only
// where it is the relayed body's length as writeAnswer would write it.
func TestSameLength(t *testing.T) {
	body := []byte("0123456789ab")
	for _, tc := range []struct {
		values []string
		length int64
		want   string
	}{
		{[]string{"12"}, 12, "12"},
		{[]string{"012"}, 12, ""},
		{[]string{"13"}, 13, ""},
		{nil, -1, ""},
		{[]string{"12", "12"}, 12, ""},
	} {
		resp := &http.Response{Header: http.Header{}, ContentLength: tc.length}
		if tc.values != nil {
			resp.Header["Content-Length"] = tc.values
		}
		if got := sameLength(resp, body); got != tc.want {
			t.Errorf("sameLength(%q, %d) = %q, want %q", tc.values, tc.length, got, tc.want)
		}
	}
	if got := sameLength(&http.Response{Header: http.Header{"Content-Length": {"0"}}}, nil); got != "0" {
		t.Errorf("sameLength of an empty body = %q, want 0", got)
	}
}
