package openai

// Prompt lists. A completion's prompt (and vLLM's prompt_embeds) and an
// embedding's input may each list several prompts, which a backend
// answers, or embeds, one by one: as strings, or as token ids. How many
// there are is what a token reservation multiplies its answers by, and a
// token id is a prompt token, whatever bytes it takes.

// PromptList is what a prompt-shaped value lists: a string, an array of
// strings, an array of token ids (integers), or an array of arrays of
// token ids.
type PromptList struct {
	// Count is how many prompts it lists: 1 for a string or one array of
	// token ids, the array's length for an array of strings or of
	// token-id arrays; 0 when the field is absent or null.
	Count int64
	// Tokens is how many token ids it gives.
	Tokens int64
	// TokenBytes is how many bytes of the body its token ids take, with
	// their brackets and commas: what an estimate of the rest by its
	// bytes leaves out.
	TokenBytes int64
	fault      listFault
	got        string // the value's kind (JSONKind), when it is neither a string nor an array
}

// listFault is why a value is not a prompt list.
type listFault uint8

const (
	listOK    listFault = iota
	listKind            // neither a string nor an array
	listEmpty           // an empty array
	listMixed           // an array of elements of different kinds, or of arrays holding other than numbers
)

// readList reads the valid JSON value v as a prompt list.
func readList(v []byte) PromptList {
	switch v[0] {
	case 'n':
		return PromptList{}
	case '"':
		return PromptList{Count: 1}
	case '[':
	default:
		return PromptList{fault: listKind, got: JSONKind(v)}
	}
	var l PromptList
	var first byte // the first element's first byte, digits and minus as '0'
	ok := eachElement(v, func(e []byte) bool {
		k := e[0]
		if k == '-' || k >= '0' && k <= '9' {
			k = '0'
		}
		if first == 0 {
			first = k
		}
		switch {
		case k != first:
			return false
		case k == '"':
			l.Count++
		case k == '0':
			l.Tokens++
		case k == '[':
			l.Count++
			return eachElement(e, func(id []byte) bool {
				l.Tokens++
				return id[0] == '-' || id[0] >= '0' && id[0] <= '9'
			})
		default:
			return false
		}
		return true
	})
	switch {
	case !ok:
		return PromptList{fault: listMixed}
	case first == 0:
		return PromptList{fault: listEmpty}
	case first == '0':
		l.Count = 1
	}
	if first != '"' {
		l.TokenBytes = int64(len(v))
	}
	return l
}

// listField is the field a prompt list of the body is read from, by
// its place in Request.lists.
var listField = [...]string{fieldNames[fieldPrompt], fieldNames[fieldPromptEmbeds], fieldNames[fieldInput]}

// Prompts is what the body lists for field: prompt (a completion's: its
// prompt's and its prompt_embeds' together) or input (an embedding's);
// nothing for any other name. It fails with a 400 naming the field whose
// value is no prompt list: not a string or an array, an empty array, or
// one of mixed elements.
func (r *Request) Prompts(field string) (PromptList, error) {
	var l PromptList
	for i, name := range listField {
		if name != field && (field != "prompt" || name != "prompt_embeds") {
			continue
		}
		one := r.lists[i]
		switch one.fault {
		case listKind:
			return PromptList{}, InvalidType(name, "a string or an array", one.got)
		case listEmpty:
			return PromptList{}, BadRequest(name, "Invalid '%s': an empty array lists no prompt.", name)
		case listMixed:
			return PromptList{}, BadRequest(name, "Invalid '%s': an array must hold only strings, only token ids, or only arrays of token ids.", name)
		}
		l.Count += one.Count
		l.Tokens += one.Tokens
		l.TokenBytes += one.TokenBytes
	}
	return l, nil
}
