package openai

// The model an answer names. Backends name the model as they know it
// (often a path or an internal name); clients are told the catalog's.

// RenameModel returns the answer object body with its top-level model
// value replaced by model, appended to dst[:0]; body itself, and false,
// when it already names model, has no top-level model string, or is not a
// JSON object. It reads only as far as the model member, so a streamed
// chunk, where it comes before the choices, costs a few dozen bytes.
func RenameModel(dst, body []byte, model string) ([]byte, bool) {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return body, false
	}
	i = skipSpace(body, i+1)
	for i < len(body) && body[i] == '"' {
		kEnd, next, err := scanMember(body, i)
		if err != nil {
			return body, false
		}
		f, exact := keyField(body[i+1:kEnd-1], fieldModel, fieldModel)
		i = skipSpace(body, next)
		vEnd, err := scanValue(body, i)
		if err != nil {
			return body, false
		}
		if f == fieldModel && exact {
			v := body[i:vEnd]
			if v[0] != '"' || decodeString(v) == model {
				return body, false
			}
			dst = append(dst[:0], body[:i]...)
			dst = appendJSONString(dst, model)
			return append(dst, body[vEnd:]...), true
		}
		i = skipSpace(body, vEnd)
		if i >= len(body) || body[i] != ',' {
			return body, false
		}
		i = skipSpace(body, i+1)
	}
	return body, false
}
