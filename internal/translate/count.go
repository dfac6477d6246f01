package translate

// A prompt's size in tokens, estimated without a model's tokenizer: what
// the Messages API's count_tokens answers. What of a prompt is counted is
// the chat format's, and so here; how text is counted is the caller's.

import "context"

// Per-message and per-answer overheads in tokens, as OpenAI counts its
// chat format: a message's role and the markers around it take about 3,
// and the answer's opening another 3.
const (
	messageOverhead = 3
	answerOverhead  = 3
)

// PromptTokens estimates the tokens c's prompt takes: its messages' text
// and tool calls, its tools' definitions, each counted by count, and the
// chat format around them. Images count nothing. It stops with ctx's
// error when ctx ends.
func PromptTokens(ctx context.Context, c *ChatRequest, count func(text string) int) (int64, error) {
	p, err := begin(ctx)
	if err != nil {
		return 0, err
	}
	n := answerOverhead
	for _, m := range c.Messages {
		if err := p.step(); err != nil {
			return 0, err
		}
		n += messageOverhead + count(contentText(m.Content))
		for _, tc := range m.ToolCalls {
			if err := p.step(); err != nil {
				return 0, err
			}
			n += count(tc.Function.Name) + count(tc.Function.Arguments)
		}
	}
	for _, t := range c.Tools {
		if err := p.step(); err != nil {
			return 0, err
		}
		n += count(t.Function.Name) + count(t.Function.Description) + count(string(t.Function.Parameters))
	}
	return int64(n), nil
}
