package openai

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestRenameModel(t *testing.T) {
	for _, tc := range []struct {
		body, want string
		renamed    bool
	}{
		{`{"id":"c1","model":"llmd-sim-8b","choices":[]}`, `{"id":"c1","model":"sim-llmd","choices":[]}`, true},
		{`{ "model" : "x" }`, `{ "model" : "sim-llmd" }`, true},
		{`{"id":"c1","model":"sim-llmd"}`, `{"id":"c1","model":"sim-llmd"}`, false},
		// Escaped spellings of the same name are the same name.
		{`{"model":"sim\u002dllmd"}`, `{"model":"sim\u002dllmd"}`, false},
		// Only the top-level member counts.
		{`{"choices":[{"model":"a"}],"x":{"model":"b"}}`, `{"choices":[{"model":"a"}],"x":{"model":"b"}}`, false},
		{`{"choices":[{"model":"a"}],"model":"b"}`, `{"choices":[{"model":"a"}],"model":"sim-llmd"}`, true},
		{`{"mod\u0065l":"x"}`, `{"mod\u0065l":"sim-llmd"}`, true},
		{`{"Model":"x"}`, `{"Model":"x"}`, false},
		{`{"model":null}`, `{"model":null}`, false},
		{`[1,2]`, `[1,2]`, false},
		{`{"model":"a"`, `{"model":"sim-llmd"`, true}, // the value is whole: renamed, the rest copied as it was
		{`{"id":`, `{"id":`, false},
		{``, ``, false},
	} {
		got, renamed := RenameModel(nil, []byte(tc.body), "sim-llmd")
		if string(got) != tc.want || renamed != tc.renamed {
			t.Errorf("RenameModel(%s) = %s, %v; want %s, %v", tc.body, got, renamed, tc.want, tc.renamed)
		}
	}
}

// A renamed answer decodes as the original did, but for the model.
func FuzzRenameModel(f *testing.F) {
	f.Add([]byte(`{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"delta":{"content":"hi"}}]}`), "catalog")
	f.Add([]byte(`{"model":"\u00e9\"","usage":{"prompt_tokens":3}}`), "<>&\u2028")
	f.Fuzz(func(t *testing.T, body []byte, model string) {
		got, renamed := RenameModel(nil, body, model)
		if !renamed {
			if string(got) != string(body) {
				t.Fatalf("not renamed, but changed: %q -> %q", body, got)
			}
			return
		}
		var before, after map[string]any
		if json.Unmarshal(body, &before) != nil {
			return
		}
		if err := json.Unmarshal(got, &after); err != nil {
			t.Fatalf("renamed %q is no longer JSON: %q: %v", body, got, err)
		}
		want, _ := json.Marshal(model)
		var m string
		json.Unmarshal(want, &m)
		if after["model"] != m && bytes.Count(body, []byte("model")) == 1 {
			t.Fatalf("model = %v, want %q", after["model"], m)
		}
		if bytes.Count(body, []byte("model")) > 1 {
			return // a key given twice, or spelled with escapes: decoders differ
		}
		delete(before, "model")
		delete(after, "model")
		b1, _ := json.Marshal(before)
		b2, _ := json.Marshal(after)
		if string(b1) != string(b2) {
			t.Fatalf("renaming changed more than the model: %s -> %s", b1, b2)
		}
	})
}
