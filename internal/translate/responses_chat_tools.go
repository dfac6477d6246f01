package translate

// The Responses API's tools as chat functions, and chat's tool calls back
// as the Responses API's. A function stays one. A custom tool, which
// takes free-form text (of a grammar, perhaps), is offered as a function
// of one string parameter, input, whose description carries the grammar.
// A namespace's functions and custom tools are offered each as a function
// of its own, named namespace__name; the namespace's description is
// written once, before the first one's own, and the others name that one.
// The answer names each call as the client named its tool: a
// function_call or custom_tool_call item with the tool's own name and,
// for one in a namespace, the namespace's in its namespace field, as
// openai-go's ResponseFunctionToolCall and ResponseCustomToolCall carry
// them ("The name of the function to run", "The namespace of the
// function to run").

import (
	"encoding/json"
	"hash/fnv"
	"strconv"

	"gitea.mynodes.xyz/ilker/llmgw/internal/openai"
)

// maxFunctionName is the longest function name OpenAI's chat API takes,
// a bound vLLM's and others' tool parsers are written for.
const maxFunctionName = 64

// maxToolName is the longest name of a namespace, or of a tool in one,
// taken, in bytes: four times the longest function name. The answer
// names each call of such a tool with both, so an answer's events grow
// by at most twice this for each call, whatever the model's output.
const maxToolName = 4 * maxFunctionName

// toolRef is the client's tool a chat function stands for.
type toolRef struct {
	namespace string // empty outside a namespace
	name      string
	custom    bool // a custom tool, whose call is answered as custom_tool_call
}

// toolKey is a tool as a call in the input names it.
type toolKey struct{ namespace, name string }

// toolNames maps the chat functions of one translation to the client's
// tools and back. It holds only the tools whose chat function differs
// from a plain function of the client's name: custom and namespaced
// tools. Its zero value maps every name to itself.
type toolNames struct {
	byChat map[string]toolRef // key: the chat function's name
	byTool map[toolKey]string // value: the chat function's name
}

func (n *toolNames) add(chat string, t toolRef) {
	if n.byChat == nil {
		n.byChat, n.byTool = make(map[string]toolRef), make(map[toolKey]string)
	}
	n.byChat[chat] = t
	n.byTool[toolKey{t.namespace, t.name}] = chat
}

// chatName is the name of the chat function offered for the client's
// tool name in namespace (empty for none). A namespaced tool the request
// did not offer is named as it would have been had it no rival.
func (n *toolNames) chatName(namespace, name string) string {
	if c, ok := n.byTool[toolKey{namespace, name}]; ok {
		return c
	}
	if namespace == "" {
		return name
	}
	return flatName(namespace, name, nil)
}

// ref is the client's tool the chat function named chat stands for: a
// function of that name when the translation offered nothing else by it.
func (n *toolNames) ref(chat string) toolRef {
	if t, ok := n.byChat[chat]; ok {
		return t
	}
	return toolRef{name: chat}
}

// maxNameTries bounds the hashed names flatName tries for one tool: a
// name taken by chance is one in four billion, so a tool still unnamed
// after this many meets names made to take its own, and is refused.
const maxNameTries = 8

// flatName is the chat function's name for tool name of namespace:
// namespace__name, each with what a function name may not hold (all but
// letters, digits, _ and -) made _, when that is at most maxFunctionName
// long and not in taken; else its first bytes and a hash of the two
// names, which a counter in the hash moves past any name taken. It is
// empty when maxNameTries hashed names are taken too.
func flatName(namespace, name string, taken map[string]bool) string {
	base := make([]byte, 0, len(namespace)+2+len(name))
	base = appendFunctionName(base, namespace)
	base = append(base, "__"...)
	base = appendFunctionName(base, name)
	if len(base) <= maxFunctionName && !taken[string(base)] {
		return string(base)
	}
	for k := range maxNameTries {
		h := fnv.New32a()
		h.Write([]byte(namespace))
		h.Write([]byte{0})
		h.Write([]byte(name))
		h.Write([]byte{0, byte(k)})
		suffix := "_" + strconv.FormatUint(uint64(h.Sum32())|1<<32, 16)[1:] // 8 hex digits
		n := string(base[:min(len(base), maxFunctionName-len(suffix))]) + suffix
		if !taken[n] {
			return n
		}
	}
	return ""
}

// appendFunctionName appends s to dst with every byte a function name
// may not hold made _.
func appendFunctionName(dst []byte, s string) []byte {
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			c = '_'
		}
		dst = append(dst, c)
	}
	return dst
}

// offerTools are the chat functions tools are offered as, and what each
// stands for. Hosted tools are left out (HostedTools says which).
func offerTools(p *progress, tools []ResponsesTool) ([]ChatTool, toolNames, error) {
	var names toolNames
	// The client's own names first: a namespaced tool's flat name must
	// not take one.
	taken := make(map[string]bool, len(tools))
	for _, t := range tools {
		if t.Type == "function" || t.Type == "custom" {
			taken[t.Name] = true
		}
	}
	var out []ChatTool
	for i, t := range tools {
		if err := p.step(); err != nil {
			return nil, names, err
		}
		path := t.path
		if path == "" {
			path = at("tools", i)
		}
		switch t.Type {
		case "function", "custom":
			ct, err := chatTool(t, path, t.Name, "")
			if err != nil {
				return nil, names, err
			}
			if t.Type == "custom" {
				names.add(t.Name, toolRef{name: t.Name, custom: true})
			}
			out = append(out, ct)
		case "namespace":
			var err error
			if out, err = offerNamespace(p, t, path, out, &names, taken); err != nil {
				return nil, names, err
			}
		case "":
			return nil, names, openai.BadRequest(path+".type", "%s.type: field required", path)
		}
	}
	return out, names, nil
}

// offerNamespace appends to out the chat functions namespace ns, at
// path, is offered as, and adds what each stands for to names; taken
// holds the function names given so far. Its description is written once,
// into the first function's: each of the others says which function that
// is, in a note of at most maxFunctionName bytes and a few words, so that
// the body grows with the namespace's size and never with its tools times
// its description.
func offerNamespace(p *progress, ns ResponsesTool, path string, out []ChatTool, names *toolNames, taken map[string]bool) ([]ChatTool, error) {
	if err := toolName(ns.Name, path+".name"); err != nil {
		return nil, err
	}
	context, first := ns.Description, ""
	for j, m := range ns.Tools {
		if err := p.step(); err != nil {
			return nil, err
		}
		mpath := at(path+".tools", j)
		if m.Type != "function" && m.Type != "custom" {
			return nil, unsupported(mpath+".type", "a namespace holds function and custom tools, not %q", m.Type)
		}
		if err := toolName(m.Name, mpath+".name"); err != nil {
			return nil, err
		}
		if _, dup := names.byTool[toolKey{ns.Name, m.Name}]; dup {
			return nil, openai.BadRequest(mpath+".name", "%s.name: %q is already a tool of namespace %q", mpath, m.Name, ns.Name)
		}
		name := flatName(ns.Name, m.Name, taken)
		if name == "" {
			return nil, unsupported(mpath+".name", "no function name is free for this tool among the request's others")
		}
		taken[name] = true
		ct, err := chatTool(m, mpath, name, context)
		if err != nil {
			return nil, err
		}
		if first == "" && ns.Description != "" {
			first = name
			context = "Part of the namespace described under " + first + "."
		}
		names.add(name, toolRef{namespace: ns.Name, name: m.Name, custom: m.Type == "custom"})
		out = append(out, ct)
	}
	return out, nil
}

// toolName is the 400 for the name of a namespace or of a tool in one, at
// path, that is empty or longer than maxToolName; nil for one taken.
func toolName(name, path string) error {
	switch {
	case name == "":
		return openai.BadRequest(path, "%s: field required", path)
	case len(name) > maxToolName:
		return openai.BadRequest(path, "%s: must be at most %d bytes long, got %d", path, maxToolName, len(name))
	}
	return nil
}

// chatTool is the function or custom tool t, at path, as the chat
// function name; context, when not empty, is what its namespace says,
// put before its own description.
func chatTool(t ResponsesTool, path, name, context string) (ChatTool, error) {
	if t.Name == "" {
		return ChatTool{}, openai.BadRequest(path+".name", "%s.name: field required", path)
	}
	var ct ChatTool
	ct.Type = "function"
	ct.Function.Name, ct.Function.Description = name, t.Description
	if context != "" {
		ct.Function.Description = context
		if t.Description != "" {
			ct.Function.Description += "\n\n" + t.Description
		}
	}
	if t.Type == "function" {
		ct.Function.Parameters, ct.Function.Strict = t.Parameters, t.Strict
		return ct, nil
	}
	params, err := customParameters(t.Format, path+".format")
	if err != nil {
		return ChatTool{}, err
	}
	ct.Function.Parameters = params
	return ct, nil
}

// customParameters is the JSON schema of the one parameter a custom tool
// of format (at path) is offered with, input: a string, described by the
// grammar it must match when the format is one.
func customParameters(format json.RawMessage, path string) (json.RawMessage, error) {
	desc := "The tool's input, as free-form text."
	if !isNull(format) {
		var f struct {
			Type       string `json:"type"`
			Syntax     string `json:"syntax"`
			Definition string `json:"definition"`
		}
		if err := decode(format, &f, path); err != nil {
			return nil, err
		}
		switch f.Type {
		case "text":
		case "grammar":
			desc = "The tool's input: text that the " + f.Syntax + " grammar below matches, and nothing else.\n\n" + f.Definition
		default:
			return nil, unsupported(path+".type", "must be text or grammar, got %q", f.Type)
		}
	}
	schema := map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"input": map[string]any{"type": "string", "description": desc}},
		"required":             []string{"input"},
		"additionalProperties": false,
	}
	return mustJSON(schema), nil
}

// customArguments is a chat call's arguments for a custom tool given
// input.
func customArguments(input string) string {
	return string(mustJSON(struct {
		Input string `json:"input"`
	}{input}))
}

// customInput is the text a custom tool is given by a chat call's
// arguments: its input parameter; else the one string the model sent,
// alone or as an object's only member; else the arguments as they came.
func customInput(args string) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &obj) == nil {
		v, ok := obj["input"]
		if !ok && len(obj) == 1 {
			for _, only := range obj {
				v = only
			}
		}
		var s string
		if isString(v) && json.Unmarshal(v, &s) == nil {
			return s
		}
	}
	var s string
	if json.Unmarshal([]byte(args), &s) == nil {
		return s
	}
	return args
}

// rawTools are tools as the client sent them, what a response echoes.
func rawTools(tools []ResponsesTool) []json.RawMessage {
	out := make([]json.RawMessage, len(tools))
	for i, t := range tools {
		out[i] = t.raw
		if out[i] == nil {
			out[i] = mustJSON(t)
		}
	}
	return out
}
