package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// poolKey is a key of no provider's shape: only the call's own key being
// known finds it.
const poolKey = "c0ffee-pool-key/0123+x"

// jsonUnescaped is s with its JSON escapes read, so that a key written
// escaped is found by strings.Contains.
func jsonUnescaped(t *testing.T, s string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		n := 2
		if s[i+1] == 'u' && i+6 <= len(s) {
			n = 6
		}
		var r string
		if err := json.Unmarshal([]byte(`"`+s[i:i+n]+`"`), &r); err != nil {
			b.WriteString(s[i : i+n])
		} else {
			b.WriteString(r)
		}
		i += n - 1
	}
	return b.String()
}

func TestRedact(t *testing.T) {
	escaped := strings.NewReplacer("c", `\u0063`, "/", `\/`, "+", `\u002B`).Replace(poolKey)
	for _, c := range []struct {
		name, in, want string
		json           bool
	}{
		{"the key", `{"error":{"message":"Incorrect API key provided: ` + poolKey + `.","type":"invalid_request_error"}}`,
			`{"error":{"message":"Incorrect API key provided: [redacted].","type":"invalid_request_error"}}`, true},
		{"the key escaped", `{"error":{"message":"key ` + escaped + ` refused"}}`,
			`{"error":{"message":"key [redacted] refused"}}`, true},
		{"the key as an object's key", `{"` + poolKey + `":1}`, `{"[redacted]":1}`, true},
		{"the key in text", `no such key: ` + poolKey, `no such key: [redacted]`, false},
		{"the key cut off", `{"message":"` + poolKey[:10] + `"}`, `{"message":"` + poolKey[:10] + `"}`, true},
		{"an OpenAI key", `{"message":"key sk-proj-AbC123_xyz-9 is wrong"}`, `{"message":"key [redacted] is wrong"}`, true},
		{"an OpenAI key masked", `{"message":"Incorrect API key provided: sk-proj-****************Ab1C."}`,
			`{"message":"Incorrect API key provided: [redacted]."}`, true},
		{"an Anthropic key", `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key sk-ant-api03-q9Z"}}`,
			`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key [redacted]"}}`, true},
		{"a Google key", `{"message":"API key AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUv not valid"}`,
			`{"message":"API key [redacted] not valid"}`, true},
		{"a bearer token", `{"message":"Authorization: Bearer xyz refused"}`, `{"message":"Authorization: Bearer [redacted] refused"}`, true},
		{"a bearer token, lower case", `{"message":"bearer  eyJhbGciOi.J9.x refused"}`, `{"message":"bearer  [redacted] refused"}`, true},
		{"words like keys", `{"message":"the task-list and desk-top"}`, `{"message":"the task-list and desk-top"}`, true},
		{"numbers and escapes kept", `{"a":[1.5e3,true,null],"b":"tab\there \"q\"","c":"sk-abcdef"}`,
			`{"a":[1.5e3,true,null],"b":"tab\there \"q\"","c":"[redacted]"}`, true},
		{"not JSON", `<html>Bearer abc</html>`, `<html>Bearer [redacted]</html>`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, isJSON := redact([]byte(c.in), []string{poolKey})
			if string(got) != c.want || isJSON != c.json {
				t.Errorf("redact(%s)\n got %s (JSON %v)\nwant %s (JSON %v)", c.in, got, isJSON, c.want, c.json)
			}
			if isJSON && !json.Valid(got) {
				t.Errorf("redact made invalid JSON: %s", got)
			}
		})
	}
}

func TestSentKeys(t *testing.T) {
	h := Headers("k1", false)
	h["X-Api-Key"] = []string{"k2"}
	h["Api-Key"] = []string{"k3"}
	if diff := cmp.Diff([]string{"k1", "k2", "k3"}, sentKeys(h)); diff != "" {
		t.Errorf("sentKeys (-want +got):\n%s", diff)
	}
	if got := sentKeys(Headers("", true)); len(got) != 0 {
		t.Errorf("sentKeys of no key: %q", got)
	}
}

func TestLoggedBodyIsCutAfterRedacting(t *testing.T) {
	// The key straddles the cut: cut first, its first bytes would stay.
	body := `{"message":"` + strings.Repeat("é", maxLoggedBody/2-10) + poolKey + `"}`
	got := loggedBody([]byte(body), []string{poolKey})
	if strings.Contains(got, poolKey[:6]) || len(got) > maxLoggedBody+3 || !strings.HasSuffix(got, "[redacte...") {
		t.Errorf("logged %q", got)
	}
}

// TestUpstreamErrorsKeepTheKey: whatever of an upstream's error reaches
// the client or the log holds none of the key the call carried, however
// the upstream quotes it.
func TestUpstreamErrorsKeepTheKey(t *testing.T) {
	escaped := strings.NewReplacer("c", `\u0063`, "/", `\/`).Replace(poolKey)
	body := `{"error":{"message":"Incorrect API key provided: ` + poolKey + ` (` + escaped + `), sent as Bearer ` + escaped + `","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	for _, c := range []struct {
		status, client int
		relayed        bool
	}{
		{401, 502, false},
		{403, 502, false},
		{400, 400, true},
		{404, 404, true},
		{402, 502, false},
		{409, 502, false},
		{500, 502, false},
	} {
		up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(c.status)
			io.WriteString(w, body)
		})
		got, o := relayThrough(t, up, Call{Header: Headers(poolKey, false)})
		if o.Status != c.client || strings.Contains(jsonUnescaped(t, got), poolKey) {
			t.Errorf("upstream %d: the client read %d %s", c.status, o.Status, got)
		}
		if o.Err != nil && strings.Contains(jsonUnescaped(t, o.Err.Error()), poolKey) {
			t.Errorf("upstream %d: the log reads %v", c.status, o.Err)
		}
		if c.relayed != strings.Contains(got, "Incorrect API key provided: [redacted]") || c.relayed && !json.Valid([]byte(got)) {
			t.Errorf("upstream %d: the client read %s; relayed redacted: want %v", c.status, got, c.relayed)
		}
		if !c.relayed && (o.Err == nil || !strings.Contains(o.Err.Error(), "Incorrect API key provided: [redacted]")) {
			t.Errorf("upstream %d: the log does not read the upstream's words redacted: %v", c.status, o.Err)
		}
	}
}

// TestStreamErrorKeepsTheKey: an error event in the middle of a stream
// reaches the client with no key in it, in OpenAI's shape and SGLang's.
func TestStreamErrorKeepsTheKey(t *testing.T) {
	for _, ev := range []string{
		`{"error":{"message":"key ` + poolKey + ` expired","type":"auth","param":null,"code":null}}`,
		`{"object": "error", "message": "key ` + poolKey + ` expired", "type": "auth", "param": null, "code": 401}`,
	} {
		got, o := relayThrough(t, script{sse(tokA, ev)}, Call{Stream: true, Header: Headers(poolKey, true)})
		if strings.Contains(got, poolKey) || !strings.Contains(got, "key [redacted] expired") || !o.Wrote {
			t.Errorf("the client read %q", got)
		}
	}
}

func FuzzRedact(f *testing.F) {
	f.Add([]byte(`{"error":{"message":"bad key c0ffee-pool-key\/0123+x","type":"x"}}`), "c0ffee-pool-key/0123+x")
	f.Add([]byte(`{"a":"\u0063\u0030ffee","b":[1,"sk-abc"]}`), "c0ffee")
	f.Add([]byte(`not json Bearer tok`), "tok")
	f.Add([]byte("\"\xac\""), "\xbd") // U+FFFD ends in the byte 0xbd
	f.Fuzz(func(t *testing.T, body []byte, key string) {
		got, isJSON := redact(body, []string{key})
		if isJSON != json.Valid(body) {
			t.Fatalf("redact says JSON %v of %q", isJSON, body)
		}
		if !isJSON {
			return
		}
		if !json.Valid(got) {
			t.Fatalf("redact(%q) = %q, not JSON", body, got)
		}
		if key == "" || strings.ContainsAny(key, redacted) {
			return // the marker itself may hold the key, or complete it
		}
		if !utf8.ValidString(key) {
			return // JSON reads no string holding it but as part of a character
		}
		// No string of the answer holds the key, read as JSON reads it.
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case string:
				if strings.Contains(v, key) {
					t.Fatalf("redact(%q) = %q still holds %q", body, got, key)
				}
			case []any:
				for _, e := range v {
					walk(e)
				}
			case map[string]any:
				for k, e := range v {
					walk(k)
					walk(e)
				}
			}
		}
		var v any
		json.Unmarshal(got, &v)
		walk(v)
	})
}
