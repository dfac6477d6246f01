package openai

import "testing"

// A completion's prompt, with its prompt_embeds, and an embedding's input
// list prompts: how many, and how many token ids they give and in how
// many bytes. A value that lists none is a 400 naming its field.
func TestPrompts(t *testing.T) {
	tests := []struct {
		body, field string
		want        PromptList
		param       string // the field a 400 names; empty for none
	}{
		{`{"model":"m","prompt":"hi"}`, "prompt", PromptList{Count: 1}, ""},
		{`{"model":"m","prompt":["a","b","c"]}`, "prompt", PromptList{Count: 3}, ""},
		{`{"model":"m","prompt":[1,22,333]}`, "prompt", PromptList{Count: 1, Tokens: 3, TokenBytes: 10}, ""},
		{`{"model":"m","prompt":[[1,2], [3]]}`, "prompt", PromptList{Count: 2, Tokens: 3, TokenBytes: 12}, ""},
		{`{"model":"m","prompt":[[]]}`, "prompt", PromptList{Count: 1, TokenBytes: 4}, ""},
		{`{"model":"m","prompt":null}`, "prompt", PromptList{}, ""},
		{`{"model":"m"}`, "prompt", PromptList{}, ""},
		{`{"model":"m","prompt":["a"],"prompt_embeds":["AAAA","BBBB"]}`, "prompt", PromptList{Count: 3}, ""},
		{`{"model":"m","prompt":["a","b"]}`, "input", PromptList{}, ""},
		{`{"model":"m","input":["a","b"]}`, "input", PromptList{Count: 2}, ""},
		{`{"model":"m","input":["a","b"]}`, "prompt", PromptList{}, ""},
		{`{"model":"m","input":[[5,6,7]]}`, "input", PromptList{Count: 1, Tokens: 3, TokenBytes: 9}, ""},
		{`{"model":"m","input":["a"]}`, "", PromptList{}, ""},
		{`{"model":"m","prompt":[]}`, "prompt", PromptList{}, "prompt"},
		{`{"model":"m","prompt":["a",1]}`, "prompt", PromptList{}, "prompt"},
		{`{"model":"m","prompt":[1,"a"]}`, "prompt", PromptList{}, "prompt"},
		{`{"model":"m","prompt":[[1],"a"]}`, "prompt", PromptList{}, "prompt"},
		{`{"model":"m","prompt":[[1,[2]]]}`, "prompt", PromptList{}, "prompt"},
		{`{"model":"m","prompt":[{"text":"a"}]}`, "prompt", PromptList{}, "prompt"},
		{`{"model":"m","prompt":{"text":"a"}}`, "prompt", PromptList{}, "prompt"},
		{`{"model":"m","prompt":"a","prompt_embeds":7}`, "prompt", PromptList{}, "prompt_embeds"},
		{`{"model":"m","input":[]}`, "input", PromptList{}, "input"},
		{`{"model":"m","input":5}`, "input", PromptList{}, "input"},
	}
	for _, tt := range tests {
		r, err := ParseRequest([]byte(tt.body))
		if err != nil {
			t.Errorf("ParseRequest(%s): %v", tt.body, err)
			continue
		}
		got, err := r.Prompts(tt.field)
		if tt.param != "" {
			if e, ok := err.(*Error); !ok || e.Status != 400 || e.Param != tt.param {
				t.Errorf("%s: Prompts(%q) = %+v, %v; want a 400 naming %s", tt.body, tt.field, got, err, tt.param)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: Prompts(%q) = %+v, %v; want %+v", tt.body, tt.field, got, err, tt.want)
		}
	}
	for _, tt := range []struct{ body, param, msg string }{
		{`{"model":"m","prompt":"a","prompt":["b","c"]}`, "prompt", "Duplicate key"},
		{`{"model":"m","Prompt":["a","b"]}`, "prompt", "only in case"},
		{`{"model":"m","INPUT":["a","b"]}`, "input", "only in case"},
	} {
		checkBadRequest(t, tt.body, Error{Param: tt.param, Message: tt.msg})
	}
}
