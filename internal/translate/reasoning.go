package translate

// A Messages request's thinking and output effort, read as one Reasoning.

// Reasoning is what a request asked of the model's reasoning. Chat
// completions have no one field for it, so it is carried beside the chat
// request and told to each pool in its own terms when a call is prepared:
// vllm and sglang pools get chat_template_kwargs.enable_thinking, openai
// and azure pools reasoning_effort, an anthropic pool the client's own
// thinking.
type Reasoning struct {
	// Asked reports whether the request said whether to think: thinking
	// enabled, adaptive or disabled. A thinking of another type is not
	// read, as if absent.
	Asked bool
	// On reports whether it asked the model to think: enabled or adaptive.
	On bool
	// Effort is how hard, low, medium or high, when On and the request
	// says: output_config.effort, else an enabled thinking's budget_tokens
	// (see effortOfBudget). Empty leaves it to the model.
	Effort string
	// Hidden reports whether the reasoning is left out of the answer
	// (display "omitted"); it still counts in usage.
	Hidden bool
}

// Budgets of thinking tokens as an effort: Anthropic's least budget is
// 1,024 and its documentation calls budgets above 16k large, so a budget
// under 4,096 thinks little and one of 16,384 or more (Claude Code asks
// for 31,999) thinks hard.
const (
	lowEffortBelow = 4096
	highEffortFrom = 16384
)

// effortOfBudget is an effort for a thinking budget, in tokens.
func effortOfBudget(budget int64) string {
	switch {
	case budget < lowEffortBelow:
		return "low"
	case budget < highEffortFrom:
		return "medium"
	}
	return "high"
}

// Reasoning is what r asks of the model's reasoning.
func (r *AnthropicRequest) Reasoning() Reasoning {
	var out Reasoning
	t := r.Thinking
	if t == nil {
		return out
	}
	out.Hidden = t.Display == "omitted"
	switch t.Type {
	case "enabled", "adaptive":
		out.Asked, out.On = true, true
	case "disabled":
		out.Asked = true
		return out
	default:
		return out
	}
	if oc := r.OutputConfig; oc != nil {
		switch oc.Effort {
		case "low", "medium", "high":
			out.Effort = oc.Effort
		case "xhigh", "max":
			out.Effort = "high"
		}
	}
	if out.Effort == "" && t.Type == "enabled" && t.BudgetTokens != nil {
		out.Effort = effortOfBudget(*t.BudgetTokens)
	}
	return out
}
