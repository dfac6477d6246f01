package translate

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestBodyHolesAreTheObjectsOwn: a client's own JSON in a translated body
// (an Anthropic system prompt of blocks, say) that holds a hole's key and
// placeholder text is written as it came, and the body's messages and
// tools go where the body's own members are.
func TestBodyHolesAreTheObjectsOwn(t *testing.T) {
	zeroMsg, zeroTool := string(mustJSON(AnthropicMessage{})), string(mustJSON(AnthropicTool{}))
	system := `[{"type":"text","text":"x","messages":[` + zeroMsg + `],"tools":[` + zeroTool + `]}]`
	r := &AnthropicRequest{
		Model:    "m",
		System:   json.RawMessage(system),
		Messages: []AnthropicMessage{{Role: "user", Content: json.RawMessage(`"hello"`)}},
		Tools:    []AnthropicTool{{Name: "f", InputSchema: json.RawMessage(`{"type":"object"}`)}},
	}
	body, err := marshalAnthropic(r, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var got AnthropicRequest
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if string(got.System) != system {
		t.Errorf("system written as %s, want %s", got.System, system)
	}
	if !reflect.DeepEqual(got.Messages, r.Messages) || !reflect.DeepEqual(got.Tools, r.Tools) {
		t.Errorf("messages %+v and tools %+v, want %+v and %+v\n%s", got.Messages, got.Tools, r.Messages, r.Tools, body)
	}
}
