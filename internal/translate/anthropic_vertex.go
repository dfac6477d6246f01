package translate

// Anthropic's models on Vertex AI: a Messages API body as Vertex takes
// it, and where it goes. Vertex reads the model from the URL and the
// API's version from the body; the answer is the Messages API's own,
// read back as chat by AnthropicUpstream.

import (
	"bytes"
	"encoding/json"
	"net/url"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
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
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, openai.BadRequest("", "The request body must be a JSON object.")
	}
	out := append(make([]byte, 0, len(body)+len(vertexVersionMember)), vertexVersionMember...)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, openai.BadRequest("", "The request body is not valid JSON.")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, openai.BadRequest("", "The request body is not valid JSON.")
		}
		key := tok.(string)
		if key == "model" || key == "anthropic_version" {
			continue
		}
		out = append(out, ',')
		out = appendJSONString(out, key)
		out = append(out, ':')
		out = append(out, v...)
	}
	return append(out, '}'), nil
}
