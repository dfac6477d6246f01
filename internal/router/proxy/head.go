package proxy

// The common upstream answer's head, read in place: an HTTP/1.1 final
// answer whose head is already buffered whole, in plain ASCII, framed by
// one Content-Length or by chunks. parseHead reads such a head to the
// same http.Response http.ReadResponse makes of it, in four allocations
// where net/http makes about ten; any head it is not sure of, it leaves
// to http.ReadResponse, so that what llmgw accepts and how it reads it
// stays net/http's (FuzzHeadMatchesNetHTTP).

import (
	"bytes"
	"net/http"
	"strings"
)

// commonKeys holds the header names upstreams send most, canonical, so
// that a name sent in another case (an ASGI server sends lower case)
// costs no allocation.
var commonKeys = map[string]string{}

func init() {
	for _, k := range []string{
		"Content-Type", "Content-Length", "Date", "Server", "Transfer-Encoding",
		"X-Request-Id", "Cache-Control", "Vary", "Content-Encoding",
	} {
		commonKeys[k] = k
	}
}

// parseHead reads the answer's head at the start of b, the bytes
// buffered for an answer to req, and returns the answer and the head's
// length; false when it leaves the head to http.ReadResponse. It takes:
//   - a status line "HTTP/1.1 DDD reason" with a status from 200 up, not
//     204 or 304 (which have no body whatever the headers say), to a
//     request other than HEAD;
//   - header lines with a token for a name, a colon, and a value of
//     visible ASCII, spaces and tabs, each ended by CRLF, none folded;
//   - framing by one Content-Length of up to 18 digits, or by one
//     Transfer-Encoding of "chunked" with no Content-Length, and no
//     Connection, Pragma or Trailer header, whose meaning net/http
//     works into the answer.
//
// The answer's Body is http.NoBody when none follows (a length of 0),
// and nil when one does: the caller reads it from its connection.
func parseHead(b []byte, req *http.Request) (*http.Response, int, bool) {
	if req != nil && req.Method == http.MethodHead {
		return nil, 0, false
	}
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		return nil, 0, false
	}
	head := string(b[:end+2]) // each line with its CRLF
	first, rest := cutLine(head)
	status, ok := statusOf(first)
	if !ok {
		return nil, 0, false
	}
	nlines := 0
	for i := range len(rest) {
		if rest[i] == '\n' {
			nlines++
		}
	}
	h := make(http.Header, nlines)
	strs := make([]string, nlines)
	for len(rest) > 0 {
		var line string
		line, rest = cutLine(rest)
		key, value, ok := fieldOf(line)
		if !ok || key == "Connection" || key == "Pragma" || key == "Trailer" {
			return nil, 0, false
		}
		if vv := h[key]; vv != nil {
			h[key] = append(vv, value)
			continue
		}
		strs[0] = value
		h[key], strs = strs[:1:1], strs[1:]
	}
	resp := &http.Response{
		Status: first[len("HTTP/1.1 "):], StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Request: req, ContentLength: -1,
	}
	if !frame(resp) {
		return nil, 0, false
	}
	return resp, end + 4, true
}

// cutLine cuts s after its first CRLF: the line before it, and what
// follows; all of s and nothing when it has none.
func cutLine(s string) (line, rest string) {
	i := strings.Index(s, "\r\n")
	if i < 0 {
		return s, ""
	}
	return s[:i], s[i+2:]
}

// statusOf is the status of an HTTP/1.1 status line whose reason, if
// any, is visible ASCII, spaces and tabs; false for any other line, and
// for a status below 200, 204 and 304.
func statusOf(line string) (int, bool) {
	const proto = "HTTP/1.1 "
	if len(line) < len(proto)+3 || line[:len(proto)] != proto {
		return 0, false
	}
	code := 0
	for _, c := range []byte(line[len(proto) : len(proto)+3]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		code = code*10 + int(c-'0')
	}
	reason := line[len(proto)+3:]
	if reason != "" && reason[0] != ' ' {
		return 0, false
	}
	for i := range len(reason) {
		if !plainValueByte(reason[i]) {
			return 0, false
		}
	}
	if code < 200 || code == http.StatusNoContent || code == http.StatusNotModified {
		return 0, false
	}
	return code, true
}

// fieldOf is a header line's canonical name and its value with the
// spaces and tabs around it trimmed; false for a line that is not a
// token, a colon and a plain value, or that starts with a space or a
// tab (a fold, or a malformed first line).
func fieldOf(line string) (key, value string, ok bool) {
	colon := -1
	for i := range len(line) {
		if line[i] == ':' {
			colon = i
			break
		}
		if !isTokenByte(line[i]) {
			return "", "", false
		}
	}
	if colon <= 0 {
		return "", "", false
	}
	v := line[colon+1:]
	for i := range len(v) {
		if !plainValueByte(v[i]) {
			return "", "", false
		}
	}
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return canonicalKey(line[:colon]), v, true
}

// canonicalKey is name, a token, in net/http's canonical form: upper case
// first and after each hyphen, lower case elsewhere. It allocates only
// for a name not in that form already nor among commonKeys.
func canonicalKey(name string) string {
	upper, canonical := true, true
	for i := range len(name) {
		c := name[i]
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			canonical = false
			break
		}
		upper = c == '-'
	}
	if canonical {
		return name
	}
	var buf [64]byte
	b := buf[:0]
	if len(name) > len(buf) {
		b = make([]byte, 0, len(name))
	}
	upper = true
	for i := range len(name) {
		c := name[i]
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
		upper = c == '-'
	}
	if k, ok := commonKeys[string(b)]; ok {
		return k
	}
	return string(b)
}

// frame sets resp's framing from its headers as http.ReadResponse would,
// and reports false for framing it leaves to http.ReadResponse: none, a
// Content-Length that is not one plain number, and a Transfer-Encoding
// that is not one "chunked" alone.
func frame(resp *http.Response) bool {
	h := resp.Header
	te, cl := h["Transfer-Encoding"], h["Content-Length"]
	switch {
	case te != nil:
		if len(te) != 1 || te[0] != "chunked" || cl != nil {
			return false
		}
		delete(h, "Transfer-Encoding")
		resp.TransferEncoding = []string{"chunked"}
		return true
	case len(cl) == 1 && len(cl[0]) > 0 && len(cl[0]) <= 18:
		var n int64
		for _, c := range []byte(cl[0]) {
			if c < '0' || c > '9' {
				return false
			}
			n = n*10 + int64(c-'0')
		}
		resp.ContentLength = n
		if n == 0 {
			resp.Body = http.NoBody
		}
		return true
	}
	return false
}

// isTokenByte reports whether c may be in a header name (RFC 9110's tchar).
func isTokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

// plainValueByte reports whether c is visible ASCII, a space or a tab:
// what parseHead takes in a value or a reason. net/http takes more
// (obs-text), which parseHead leaves to it.
func plainValueByte(c byte) bool { return c == '\t' || ' ' <= c && c <= '~' }
