// Package cloudtest is, for tests, local servers speaking the clouds'
// own wire formats: a Bedrock runtime endpoint (Converse and
// ConverseStream, every call's SigV4 signature checked with the AWS SDK's
// signer, streams encoded by the SDK's protocol) and a generateContent
// endpoint, the Gemini API's or Vertex AI's (read into and answered with
// the genai SDK's types), with the credentials each expects. Each answers
// fixed text, or what a Script says for each request. Never linked into
// the binary.
package cloudtest

import "strings"

// Script answers a request as a scripted model: what it reads of the
// request in, its answer out. It is called from the servers' handlers, so
// it must be safe for concurrent use.
type Script func(Turn) Reply

// Turn is what a scripted server reads of one request.
type Turn struct {
	Stream   bool
	Tools    []string  // the functions offered, by name
	Messages []Message // in order, the system prompt not among them
}

// Message is one message's text: Role is user, assistant, or tool for a
// tool's result (sent in the wire's user turn).
type Message struct {
	Role, Text string
}

// Reply is a scripted answer: Text, or, when Tool is set, a call of Tool
// with Args, a JSON object.
type Reply struct {
	Text       string
	Tool, Args string
}

// words is s split after each space, as a stream's deltas.
func words(s string) []string { return strings.SplitAfter(s, " ") }
