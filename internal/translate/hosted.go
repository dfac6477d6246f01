package translate

// Tools that run on a provider's side: the Responses API's hosted tools
// (web search, file search, code interpreter...) and the Messages API's
// server tools. A model behind chat completions is offered the client's
// own tools alone, so a translation leaves these out; the router says
// which it left out, or refuses the request where the model's catalog
// entry asks it to (hosted_tools: refuse).

import (
	"bytes"
	"encoding/json"
	"strings"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// HostedTool is a tool of a request that a translation leaves out: its
// type as the client named it, and where it is in the request, as errors
// name it (tools[3], input[0].tools[1]).
type HostedTool struct {
	Type string
	Path string
}

// HostedTools are the tools of r that ToChat left out: every tool but
// functions, custom tools and namespaces of them, in tools and in
// additional_tools input items. It is ToChat's to call first.
func (r *ResponsesRequest) HostedTools() []HostedTool {
	var out []HostedTool
	for _, tools := range [][]ResponsesTool{r.Tools, r.added} {
		for _, t := range tools {
			if isHostedTool(t.Type) {
				out = append(out, HostedTool{Type: t.Type, Path: t.path})
			}
		}
	}
	return out
}

// isHostedTool reports whether a Responses tool of type typ runs on the
// provider's side, or is otherwise one a chat model cannot be offered.
// A tool without a type is the client's mistake, not a hosted tool.
func isHostedTool(typ string) bool {
	return typ != "" && typ != "function" && typ != "custom" && typ != "namespace"
}

// ServerTools are the tools of r that ToChat leaves out: Anthropic's
// server tools (web search, code execution...), every tool whose type is
// neither empty nor custom.
func (r *AnthropicRequest) ServerTools() []HostedTool {
	var out []HostedTool
	for i, t := range r.Tools {
		if isServerTool(t) {
			out = append(out, HostedTool{Type: t.Type, Path: at("tools", i)})
		}
	}
	return out
}

// isServerTool reports whether t is one of Anthropic's server tools,
// which run on Anthropic's side.
func isServerTool(t AnthropicTool) bool {
	return t.Type != "" && t.Type != "custom"
}

// HostedToolsRefused is the 400 for a request whose model refuses the
// hosted tools it names, naming the first.
func HostedToolsRefused(tools []HostedTool) *openai.Error {
	t := tools[0]
	return unsupported(t.Path+".type", "%q is a hosted tool this gateway cannot run; only the client's own tools can be used with this model", t.Type)
}

// maxDroppedTools bounds what DroppedTools says: a header of a few
// hundred bytes names every hosted tool OpenAI and Anthropic define,
// and no client can make the answer's headers grow past it.
const maxDroppedTools = 512

// DroppedTools names the types of tools, each once, in their order,
// comma-separated: what the X-Llmgw-Dropped-Tools header says. A type
// that is not a short name of letters, digits and _ - . : is named
// "other", and past maxDroppedTools bytes the list ends with "...".
func DroppedTools(tools []HostedTool) string {
	var b strings.Builder
	seen := make(map[string]bool, len(tools))
	for _, t := range tools {
		typ := t.Type
		if !isToolType(typ) {
			typ = "other"
		}
		if seen[typ] {
			continue
		}
		seen[typ] = true
		if b.Len()+len(typ)+2 > maxDroppedTools {
			b.WriteString(", ...")
			break
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(typ)
	}
	return b.String()
}

// isToolType reports whether s may be written in a header as it is: 1 to
// 64 letters, digits and _ - . :, as every tool type is.
func isToolType(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// WithoutServerTools is body, a Messages API request the gateway has
// read, with its server tools left out of tools (and tools left out when
// none is left) and without mcp_servers (connectors the provider would
// reach on the client's word): what an anthropic pool is sent of a
// request whose server tools were dropped, as they run, and are billed,
// on the pool's account, not the tenant's. Every other member is kept as
// it came, in its place.
func WithoutServerTools(body []byte) ([]byte, error) {
	return rewriteMembers(body, append(make([]byte, 0, len(body)), '{'), func(key string, v json.RawMessage) (json.RawMessage, error) {
		switch key {
		case "mcp_servers":
			return nil, nil
		case "tools":
			v, err := clientTools(v)
			if err != nil || string(v) == "[]" {
				return nil, err
			}
			return v, nil
		}
		return v, nil
	})
}

// rewriteMembers is body, a JSON object, with its members written after
// out (an object's start, with or without members of its own) as keep
// says: its value for a member, in place of the one body gave, or nil to
// leave the member out. The members are read in order, each value whole,
// as encoding/json reads them; a body that is not an object is a 400.
func rewriteMembers(body, out []byte, keep func(key string, v json.RawMessage) (json.RawMessage, error)) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, openai.BadRequest("", "The request body must be a JSON object.")
	}
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
		if v, err = keep(key, v); err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		if out[len(out)-1] != '{' {
			out = append(out, ',')
		}
		out = appendJSONString(out, key)
		out = append(append(out, ':'), v...)
	}
	return append(out, '}'), nil
}

// clientTools is a tools array with Anthropic's server tools left out.
func clientTools(raw json.RawMessage) (json.RawMessage, error) {
	var tools []json.RawMessage
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, typeError("tools", "an array", jsonKind(raw))
	}
	kept := tools[:0]
	for _, t := range tools {
		var typed struct {
			Type string `json:"type"`
		}
		json.Unmarshal(t, &typed)
		if !isServerTool(AnthropicTool{Type: typed.Type}) {
			kept = append(kept, t)
		}
	}
	if len(kept) == 0 {
		return json.RawMessage("[]"), nil
	}
	return mustJSON(kept), nil
}

// appendJSONString appends s to dst as a JSON string.
func appendJSONString(dst []byte, s string) []byte {
	return append(dst, mustJSON(s)...)
}
