package bench

// Prompt text of a known length: words drawn from a fixed vocabulary until
// the project's tokenizer counts the wanted number of tokens. Every word is
// written with its leading space, so pieces of text join without changing
// how their words are split, and a prompt built of pieces counts about the
// sum of their counts.

import (
	"math"
	"math/rand/v2"
)

// Texts makes prompt text. Blocks are cached by id, so equal ids give
// identical text and requests that share them share a real prefix. A Texts
// is not safe for concurrent use.
type Texts struct {
	count   func(string) int // the tokenizer: tokens in a text
	perWord float64          // mean tokens per vocabulary word under count
	blocks  map[blockKey]string
}

type blockKey struct {
	id     uint64
	tokens int
}

// calibrationWords is how many words the tokens-per-word estimate is
// measured over: enough that the mean is stable to a percent.
const calibrationWords = 4000

// blockStream is the PCG stream of block text, apart from the workload's
// own stream so a block's words depend on its id alone.
const blockStream = 0x626c6f636b // "block"

// NewTexts makes text measured by count, which must return the number of
// tokens in a text (tokenize.Count in llmgw).
func NewTexts(count func(string) int) *Texts {
	t := &Texts{count: count, blocks: make(map[blockKey]string)}
	rng := rand.New(rand.NewPCG(1, blockStream))
	buf := appendWords(nil, rng, calibrationWords)
	t.perWord = float64(max(1, count(string(buf)))) / calibrationWords
	return t
}

// Block is the text of block id, tokens long. The same id and length give
// the same text; the same id with a shorter length gives a prefix of it.
func (t *Texts) Block(id uint64, tokens int) string {
	k := blockKey{id, tokens}
	if s, ok := t.blocks[k]; ok {
		return s
	}
	s := t.generate(rand.New(rand.NewPCG(id, blockStream)), tokens)
	t.blocks[k] = s
	return s
}

// Random is text of tokens tokens drawn from rng, not cached.
func (t *Texts) Random(rng *rand.Rand, tokens int) string { return t.generate(rng, tokens) }

// Count is the number of tokens in text under the tokenizer t measures with.
func (t *Texts) Count(text string) int { return t.count(text) }

// generate draws words from rng until the text counts n tokens, or as
// close as whole words get. The result is always a prefix of the word
// stream rng yields, whatever n is.
func (t *Texts) generate(rng *rand.Rand, n int) string {
	if n <= 0 {
		return ""
	}
	var buf []byte
	var ends []int // ends[i] is the length of the text of words 0..i
	grow := func(k int) {
		for len(ends) < k {
			buf = appendWords(buf, rng, 1)
			ends = append(ends, len(buf))
		}
	}
	k := max(1, int(math.Round(float64(n)/t.perWord)))
	bestK, bestDiff := 0, math.MaxInt
	tried := map[int]bool{}
	for range 16 {
		grow(k)
		tried[k] = true
		c := t.count(string(buf[:ends[k-1]]))
		diff := n - c
		if abs(diff) < bestDiff {
			bestK, bestDiff = k, abs(diff)
		}
		if diff == 0 {
			break
		}
		step := int(math.Round(float64(diff) / t.perWord))
		if step == 0 {
			step = sign(diff)
		}
		next := max(1, k+step)
		if tried[next] {
			// Whole words cannot land closer than the neighbours already
			// tried; step by one word toward n if that is still untried.
			next = max(1, k+sign(diff))
			if tried[next] {
				break
			}
		}
		k = next
	}
	return string(buf[:ends[bestK-1]])
}

// appendWords appends k units of text: a word with its leading space, or
// one time in ten a full stop. Each unit is one token.
func appendWords(buf []byte, rng *rand.Rand, k int) []byte {
	for range k {
		if i := rng.IntN(len(vocabulary) + len(vocabulary)/9); i < len(vocabulary) {
			buf = append(buf, ' ')
			buf = append(buf, vocabulary[i]...)
		} else {
			buf = append(buf, '.')
		}
	}
	return buf
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

// vocabulary is common English words of at most tokenize.WordBytes
// letters: each is one token under llmgw's tokenizer, and in most BPE
// vocabularies.
var vocabulary = [...]string{
	"the", "of", "and", "to", "in", "is", "that", "for", "it", "as",
	"was", "with", "be", "by", "on", "not", "he", "this", "are", "or",
	"his", "from", "at", "which", "but", "have", "an", "had", "they", "you",
	"were", "their", "one", "all", "we", "can", "her", "has", "there", "been",
	"if", "more", "when", "will", "would", "who", "so", "no", "she", "other",
	"its", "may", "these", "what", "them", "than", "some", "him", "time", "into",
	"only", "do", "could", "new", "about", "two", "first", "then", "any", "like",
	"my", "now", "over", "such", "our", "man", "me", "even", "most", "made",
	"after", "also", "did", "many", "must", "back", "years", "where", "much", "your",
	"way", "well", "down", "each", "just", "those", "how", "too", "state", "good",
	"very", "make", "world", "still", "own", "see", "men", "work", "long", "get",
	"here", "both", "life", "being", "under", "never", "day", "same", "know", "while",
	"last", "might", "us", "great", "old", "year", "off", "come", "since", "go",
	"came", "right", "used", "take", "three", "small", "house", "use", "again", "place",
	"home", "found", "went", "say", "part", "once", "high", "upon", "every", "does",
	"got", "left", "war", "until", "away", "fact", "water", "less", "put", "think",
	"hand", "far", "took", "head", "yet", "set", "told", "night", "end", "why",
	"data", "eyes", "find", "going", "look", "asked", "later", "knew", "point", "next",
	"city", "give", "group", "young", "let", "room", "side", "given", "order", "per",
	"face", "among", "form", "often", "early", "white", "case", "john", "large", "big",
	"need", "four", "felt", "along", "saw", "best", "ever", "least", "power", "light",
	"thing", "able", "act", "add", "age", "ago", "air", "arm", "art", "ask",
	"bad", "bank", "bed", "bit", "blue", "body", "book", "born", "box", "boy",
	"car", "card", "care", "cell", "check", "clear", "close", "cold", "cost", "cut",
	"dark", "deal", "door", "draw", "drive", "easy", "eat", "fall", "fast", "fear",
	"field", "fill", "final", "fine", "fire", "fish", "five", "floor", "fly", "food",
	"foot", "free", "front", "full", "game", "girl", "glass", "gold", "green", "grow",
	"hair", "half", "hard", "heart", "heavy", "help", "hold", "hope", "hot", "hour",
	"idea", "issue", "job", "key", "kind", "land", "late", "law", "lead", "learn",
	"line", "list", "live", "local", "lose", "love", "low", "main", "major", "map",
	"mark", "meet", "mind", "miss", "model", "money", "month", "move", "music", "name",
	"near", "note", "open", "page", "paper", "party", "pass", "pay", "peace", "plan",
	"play", "price", "quite", "race", "rate", "read", "real", "red", "rest", "rich",
	"rise", "river", "road", "rock", "role", "rule", "run", "safe", "sea", "seat",
	"sell", "send", "serve", "short", "show", "sign", "sit", "size", "skill", "sort",
	"sound", "space", "speak", "stand", "star", "stay", "step", "stop", "story", "study",
	"sure", "table", "talk", "tax", "team", "tell", "term", "test", "text", "tree",
	"true", "try", "turn", "type", "view", "vote", "wait", "walk", "wall", "want",
	"watch", "wear", "week", "west", "wide", "wife", "win", "wind", "woman", "word",
	"write", "wrong", "yard", "yes",
}
