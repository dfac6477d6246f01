package openai

// The relay's hooks for APIs other than chat completions. A client that
// speaks another API (Anthropic's Messages, OpenAI's Responses) is answered
// through a Translator; an upstream that speaks another API is read through
// a Provider. The relay still reads, times and accounts chat completion
// events; the hooks only turn them from and into the other API, so a
// translated stream is measured exactly as a chat stream is. They are
// defined here, at the wire, so that the translations implement them and
// the relay calls them without either importing the other.

// Translator turns one request's chat completions answer into the client's
// API. A nil Translator relays the answer as it came.
type Translator interface {
	// Stream begins the translation of a streamed answer: a fresh one for
	// every upstream call, as a retried call starts over.
	Stream() EventTranslator
	// Answer is the client's body for a whole chat completion body; an
	// error means the upstream's answer is not one.
	Answer(chat []byte) ([]byte, error)
	// ErrorBody is the client's body for an error, its status e.Status.
	ErrorBody(e *Error) []byte
}

// EventTranslator translates one streamed answer, event by event.
type EventTranslator interface {
	// Event writes through emit what the client is sent for one upstream
	// event's data: a chat completion chunk, an error object, or Done,
	// which ends a whole answer. It may write nothing, and an error from
	// emit is returned: the client has gone.
	Event(data []byte, emit Emit) error
	// Fail writes the events that end a broken stream with e, in place of
	// an answer's end: the client must not take the part for the whole.
	Fail(e *Error, emit Emit)
}

// Emit writes one event to the client: kind is its SSE event type (none
// when empty), data its data line. data may be reused once Emit returns.
type Emit func(kind, data []byte) error

// Provider reads an upstream that speaks another API than chat
// completions (Anthropic's Messages API) as if it spoke chat: its answers,
// stream events and errors are turned into chat's before anything else
// reads them, so that the relay times, counts and relays chat as always.
// A nil Provider reads chat completions as they come.
type Provider interface {
	// Stream begins reading a streamed answer: a fresh one for every call.
	Stream() EventDecoder
	// Answer is a whole answer as a chat completion body.
	Answer(body []byte) ([]byte, error)
	// Error is an error answer's body as an OpenAI error body.
	Error(status int, body []byte) []byte
}

// EventDecoder turns one upstream stream's events into chat chunks.
type EventDecoder interface {
	// Event appends to chunks the chat chunks (or Done) that one upstream
	// event of type kind means, and returns them; they may use memory of
	// the decoder's until the next call.
	Event(kind, data []byte, chunks [][]byte) [][]byte
}

// BinaryStreamer is a Provider whose streams are not SSE but a binary
// event stream of length-prefixed messages (AWS's
// application/vnd.amazon.eventstream): each message, whole, is handed to
// its EventDecoder as one event's data, with no type.
type BinaryStreamer interface {
	Provider
	// StreamContentType is the content type of its streams.
	StreamContentType() string
}
