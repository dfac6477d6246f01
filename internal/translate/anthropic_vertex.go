package translate

// Anthropic's models on Vertex AI: a Messages API body as Vertex takes
// it, and where it goes. Vertex reads the model from the URL and the
// API's version from the body; the answer is the Messages API's own,
// read back as chat by AnthropicUpstream.

import (
	"encoding/json"
	"net/url"
)

// VertexAnthropicVersion is the anthropic_version Vertex AI's Anthropic
// models take in the body, the one version it serves.
const VertexAnthropicVersion = "vertex-2023-10-16"

// VertexAnthropicURL is where a Messages API call for model goes at
// base, a vertex pool's URL up to and with its publisher
// (.../publishers/anthropic): rawPredict, or streamRawPredict for a
// stream.
func VertexAnthropicURL(base, model string, stream bool) string {
	verb := ":rawPredict"
	if stream {
		verb = ":streamRawPredict"
	}
	return base + "/models/" + url.PathEscape(model) + verb
}

// vertexVersionMember is the member every body sent to Vertex begins with.
const vertexVersionMember = `{"anthropic_version":"` + VertexAnthropicVersion + `"`

// ToVertexAnthropic is body, a Messages API request, as Vertex AI takes
// it: without model (the URL names it) and with anthropic_version
// VertexAnthropicVersion in place of any the body gave. Every other
// member is kept as it came, in its order.
func ToVertexAnthropic(body []byte) ([]byte, error) {
	out := append(make([]byte, 0, len(body)+len(vertexVersionMember)), vertexVersionMember...)
	return rewriteMembers(body, out, func(key string, v json.RawMessage) (json.RawMessage, error) {
		if key == "model" || key == "anthropic_version" {
			return nil, nil
		}
		return v, nil
	})
}
