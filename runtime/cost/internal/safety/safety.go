package safety

import (
	"bufio"
	_ "embed"
	"fmt"
	"strings"

	"github.com/coregx/ahocorasick"
)

// wordList is the shipped phrase list: one phrase a line, lower case;
// blank lines and lines starting with # are skipped.
//
//go:embed words.txt
var wordList string

// secretFormat is a credential format: a literal prefix, then at least min
// characters of its alphabet.
type secretFormat struct {
	prefix string
	min    int
	alpha  func(byte) bool
}

// secretFormats are well-known credential shapes.
var secretFormats = []secretFormat{
	{"sk-", 20, keyChar},            // OpenAI and many others
	{"sk_live_", 16, keyChar},       // Stripe
	{"AKIA", 16, upperOrDigit},      // AWS access key id
	{"ghp_", 30, alnum},             // GitHub personal access token
	{"github_pat_", 30, keyChar},    // GitHub fine-grained token
	{"xoxb-", 20, keyChar},          // Slack bot token
	{"xoxp-", 20, keyChar},          // Slack user token
	{"AIza", 30, keyChar},           // Google API key
	{"glpat-", 20, keyChar},         // GitLab token
	{"-----BEGIN ", 11, headerChar}, // PEM block: "RSA PRIVATE KEY-----" and kin
}

// Classifier finds flagged phrases and secrets in text. It is immutable
// and safe for concurrent use.
type Classifier struct {
	words   *ahocorasick.Automaton
	secrets *ahocorasick.Automaton
}

// Result is what one Scan found.
type Result struct {
	Bytes   int // text read
	Words   int // flagged phrases
	Secrets int // credentials
}

// Flags is how many things the scan found.
func (r Result) Flags() int { return r.Words + r.Secrets }

// New builds the classifier from the shipped word list and secret formats.
func New() (*Classifier, error) {
	var phrases []string
	sc := bufio.NewScanner(strings.NewReader(wordList))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		// ASCII case-insensitivity without lowering the text: each phrase
		// in the case forms text takes.
		phrases = append(phrases, line, strings.ToUpper(line), titleCase(line), sentenceCase(line))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	words, err := ahocorasick.NewBuilder().SetMatchKind(ahocorasick.LeftmostLongest).AddStrings(dedupe(phrases)).Build()
	if err != nil {
		return nil, fmt.Errorf("safety: word list: %w", err)
	}
	var prefixes []string
	for _, f := range secretFormats {
		prefixes = append(prefixes, f.prefix)
	}
	secrets, err := ahocorasick.NewBuilder().AddStrings(prefixes).Build()
	if err != nil {
		return nil, fmt.Errorf("safety: secret formats: %w", err)
	}
	return &Classifier{words: words, secrets: secrets}, nil
}

// Scan classifies text.
func (c *Classifier) Scan(text []byte) Result {
	r := Result{Bytes: len(text)}
	for at := 0; at < len(text); {
		m, ok := c.words.Find(text, at)
		if !ok {
			break
		}
		if wordBoundary(text, m.Start, m.End) {
			r.Words++
		}
		at = m.End
	}
	for at := 0; at < len(text); {
		m, ok := c.secrets.Find(text, at)
		if !ok {
			break
		}
		at = m.End
		f := secretFormats[m.PatternID]
		n := 0
		for at < len(text) && f.alpha(text[at]) {
			at++
			n++
		}
		if n >= f.min && (f.prefix[0] == '-' || m.Start == 0 || !keyChar(text[m.Start-1])) {
			r.Secrets++
		}
	}
	return r
}

// wordBoundary reports whether text[start:end] is not part of a longer word.
func wordBoundary(text []byte, start, end int) bool {
	return (start == 0 || !alnum(text[start-1])) && (end == len(text) || !alnum(text[end]))
}

func alnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}
func upperOrDigit(b byte) bool { return b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' }
func keyChar(b byte) bool      { return alnum(b) || b == '-' || b == '_' }
func headerChar(b byte) bool   { return b >= 'A' && b <= 'Z' || b == ' ' || b == '-' }

func titleCase(s string) string {
	b := []byte(s)
	up := true
	for i, c := range b {
		if up && c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
		up = c == ' ' || c == '-'
	}
	return string(b)
}

func sentenceCase(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

func dedupe(ss []string) []string {
	seen := make(map[string]bool, len(ss))
	out := ss[:0]
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// AppendText appends to buf the text a classifier reads in each string,
// separated by newlines: a helper for callers that gather a request's text.
func AppendText(buf []byte, texts ...string) []byte {
	for _, t := range texts {
		if t == "" {
			continue
		}
		if len(buf) > 0 {
			buf = append(buf, '\n')
		}
		buf = append(buf, t...)
	}
	return buf
}
