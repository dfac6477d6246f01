package translate

// A prompt's size in tokens, estimated without a model's tokenizer: what
// the Messages API's count_tokens answers.

import (
	"context"

	"gitea.mynodes.xyz/ilker/llmgw/internal/tokenize"
)

// Per-message and per-answer overheads in tokens, as OpenAI counts its
// chat format: a message's role and the markers around it take about 3,
// and the answer's opening another 3.
const (
	messageOverhead = 3
	answerOverhead  = 3
)

// PromptTokens estimates the tokens c's prompt takes: its messages' text
// and tool calls, its tools' definitions, and the chat format around them,
// counted by llmgw's approximate tokenizer. Images count nothing. It
// stops with ctx's error when ctx ends.
func PromptTokens(ctx context.Context, c *ChatRequest) (int64, error) {
	p, err := begin(ctx)
	if err != nil {
		return 0, err
	}
	n := answerOverhead
	for _, m := range c.Messages {
		if err := p.step(); err != nil {
			return 0, err
		}
		n += messageOverhead + tokenize.Count(contentText(m.Content))
		for _, tc := range m.ToolCalls {
			if err := p.step(); err != nil {
				return 0, err
			}
			n += tokenize.Count(tc.Function.Name) + tokenize.Count(tc.Function.Arguments)
		}
	}
	for _, t := range c.Tools {
		if err := p.step(); err != nil {
			return 0, err
		}
		n += tokenize.Count(t.Function.Name) + tokenize.Count(t.Function.Description) + tokenize.Count(string(t.Function.Parameters))
	}
	return int64(n), nil
}
