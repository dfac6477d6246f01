package h1

// Reading a request as net/http's server reads it. The parser is
// net/http's own, and what its server checks after parsing is checked
// here the same way: the version, the Host header, header names and
// values, Expect, and whether the client wants the connection kept. A
// request the two could read differently is how one is smuggled past the
// other, so h1 accepts nothing net/http's server refuses, and reads what
// it accepts the same way.

import (
	"bufio"
	"net/http"
	_ "unsafe" // for net/http's readRequest

	"golang.org/x/net/http/httpguts"
)

// readRequest is net/http's request parser as its server calls it: with
// the Host header still in Header, where http.ReadRequest removes it and
// with it the difference between a request that has one and one whose
// target names the host. net/http keeps it for other modules to call, and
// promises not to change its signature (go.dev/issue/67401).
//
//go:linkname readRequest net/http.readRequest
func readRequest(b *bufio.Reader) (*http.Request, error)

// checkRequest refuses what net/http's server refuses once a request is
// parsed: a version other than 1.x, an HTTP/1.1 request without a Host
// header, a malformed Host, and a header field whose name or value is
// not valid. It returns the status to answer with and why, or 0, and
// removes the Host header, whose value is in req.Host.
func checkRequest(req *http.Request) (status int, why string) {
	if !supportedVersion(req) {
		return http.StatusHTTPVersionNotSupported, "The request's HTTP version is not supported."
	}
	hosts := req.Header["Host"]
	if len(hosts) == 0 && req.ProtoAtLeast(1, 1) && !isH2Preface(req) && req.Method != http.MethodConnect {
		return http.StatusBadRequest, "The request has no Host header."
	}
	if len(hosts) == 1 && !httpguts.ValidHostHeader(hosts[0]) {
		return http.StatusBadRequest, "The request's Host header is malformed."
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return http.StatusBadRequest, "The request has an invalid header name."
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return http.StatusBadRequest, "The request has an invalid header value."
			}
		}
	}
	delete(req.Header, "Host")
	return 0, ""
}

// supportedVersion reports whether req is HTTP/1.x, or the preface an
// HTTP/2 client opens with, which net/http hands to the handler too.
func supportedVersion(req *http.Request) bool {
	return req.ProtoMajor == 1 ||
		req.ProtoMajor == 2 && req.ProtoMinor == 0 && req.Method == "PRI" && req.RequestURI == "*"
}

// isH2Preface reports whether req is the "PRI * HTTP/2.0" line an HTTP/2
// client opens with; the parser has already marked it to close.
func isH2Preface(req *http.Request) bool {
	return req.Method == "PRI" && len(req.Header) == 0 && req.URL.Path == "*" && req.Proto == "HTTP/2.0"
}

// closeAfter reports whether the client wants the connection closed after
// req's answer: an HTTP/1.0 one unless it asks for keep-alive, an HTTP/1.1
// one when it asks to close. Like net/http's server it reads the first
// Connection header's tokens, and like the parser all of them; either
// asking to close closes.
func closeAfter(req *http.Request) bool {
	conn := req.Header.Get("Connection")
	if !req.ProtoAtLeast(1, 1) {
		return req.Close || !hasToken(conn, "keep-alive")
	}
	return req.Close || hasToken(conn, "close")
}

// hasToken reports whether token, which is lower case, appears in v
// between spaces, tabs or commas, in any case: net/http's test for
// Connection and Expect tokens.
func hasToken(v, token string) bool {
	for i := 0; i+len(token) <= len(v); i++ {
		if i > 0 && !isTokenBoundary(v[i-1]) {
			continue
		}
		if end := i + len(token); end < len(v) && !isTokenBoundary(v[end]) {
			continue
		}
		if equalFoldASCII(v[i:i+len(token)], token) {
			return true
		}
	}
	return false
}

func isTokenBoundary(b byte) bool { return b == ' ' || b == ',' || b == '\t' }

// equalFoldASCII reports whether s and lower are equal with s's ASCII
// letters in lower case.
func equalFoldASCII(s, lower string) bool {
	for i := range len(s) {
		b := s[i]
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if b != lower[i] {
			return false
		}
	}
	return true
}

// leadingLineBreaks is how many of b's first bytes are CR or LF: the line
// breaks a client may send after a POST's body, which net/http's server
// skips before the next request and so does h1.
func leadingLineBreaks(b []byte) int {
	n := 0
	for n < len(b) && (b[n] == '\r' || b[n] == '\n') {
		n++
	}
	return n
}
