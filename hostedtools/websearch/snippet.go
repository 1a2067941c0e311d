package websearch

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// snippetLen is the most characters (runes) a source's snippet holds.
const snippetLen = 300

// queryTerms are a query's analyzed terms, as the index sees them.
type queryTerms struct {
	set map[string]bool
	// prefixes are the terms without their last letter. Analysis rewrites
	// at most the last letter of what it keeps of a word (Porter: query ->
	// queri, hoping -> hope; camelCase splitting and lower-casing keep the
	// letters), so a word whose lower-cased text holds none of them cannot
	// analyze to a term and need not be analyzed.
	prefixes []string
}

func (ix *Index) terms(query string) queryTerms {
	ts := ix.analyzer.Analyze([]byte(query))
	q := queryTerms{set: make(map[string]bool, len(ts))}
	for _, t := range ts {
		term := string(t.Term)
		if q.set[term] {
			continue
		}
		q.set[term] = true
		if _, last := utf8.DecodeLastRuneInString(term); len(term) > last {
			term = term[:len(term)-last]
		}
		q.prefixes = append(q.prefixes, term)
	}
	return q
}

// mayHold reports whether word may analyze to one of the terms.
func (q queryTerms) mayHold(word string) bool {
	lower := strings.ToLower(word)
	for _, pre := range q.prefixes {
		if strings.Contains(lower, pre) {
			return true
		}
	}
	return false
}

// snippet picks the paragraph of body that holds the most distinct query
// terms (the first such paragraph on ties), collapses its white space and
// clips it to snippetLen runes around its first match.
func (ix *Index) snippet(body string, q queryTerms) string {
	best, bestScore, bestAt := "", -1, 0
	for p := range paragraphs(body) {
		p = collapseSpace(p)
		if p == "" {
			continue
		}
		score, at := ix.match(p, q)
		if score > bestScore {
			best, bestScore, bestAt = p, score, at
		}
		if bestScore == len(q.set) {
			break // cannot do better
		}
	}
	return clip(best, bestAt, snippetLen)
}

// match counts the distinct query terms in passage p and returns the byte
// offset of the first one. Only words that hold a term's prefix go through
// the analyzer: analyzing every passage of every hit costs more than the
// search itself.
func (ix *Index) match(p string, q queryTerms) (score, at int) {
	if len(q.set) == 0 {
		return 0, 0
	}
	var seen map[string]bool
	for start := 0; start < len(p); {
		r, size := utf8.DecodeRuneInString(p[start:])
		if !isWordRune(r) {
			start += size
			continue
		}
		end := start + size
		for end < len(p) {
			r, size := utf8.DecodeRuneInString(p[end:])
			if !isWordRune(r) {
				break
			}
			end += size
		}
		if word := p[start:end]; q.mayHold(word) {
			for _, t := range ix.analyzer.Analyze([]byte(word)) {
				term := string(t.Term)
				if !q.set[term] || seen[term] {
					continue
				}
				if seen == nil {
					seen = make(map[string]bool, len(q.set))
					at = start + t.Start
				}
				seen[term] = true
			}
		}
		start = end
	}
	return len(seen), at
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// paragraphs yields the blank-line separated paragraphs of s.
func paragraphs(s string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		var b strings.Builder
		for line := range strings.Lines(s) {
			if strings.TrimSpace(line) == "" {
				if b.Len() > 0 && !yield(b.String()) {
					return
				}
				b.Reset()
				continue
			}
			b.WriteString(line)
		}
		if b.Len() > 0 {
			yield(b.String())
		}
	}
}

// plainSnippet collapses the white space of s and clips it to snippetLen runes
// at a word boundary, for searchers whose backend chose the passage.
func plainSnippet(s string) string {
	return clip(collapseSpace(s), 0, snippetLen)
}

// collapseSpace replaces every run of white space with one space and trims
// both ends.
func collapseSpace(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// clip returns at most n runes of s (already whitespace-collapsed) that
// include byte offset at: from the start of s when at is near enough,
// otherwise from the start of at's sentence, or of a word shortly before at.
// Cut ends are marked with an ellipsis, which counts towards n.
func clip(s string, at, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	start := 0
	if at > 0 && utf8.RuneCountInString(s[:at]) > n/3 {
		start = sentenceStart(s, at, n/3)
	}
	prefix := ""
	if start > 0 {
		prefix = "…"
		n--
	}
	rest := s[start:]
	if utf8.RuneCountInString(rest) <= n {
		return prefix + rest
	}
	n-- // room for the closing ellipsis
	cut := byteOffset(rest, n)
	if i := strings.LastIndexByte(rest[:cut], ' '); i > cut/2 {
		cut = i
	}
	return prefix + strings.TrimRight(rest[:cut], " ,;:") + "…"
}

// sentenceStart finds where to start a snippet that must show byte offset
// at: the start of its sentence if that is within back runes, else the
// start of the word back runes before at.
func sentenceStart(s string, at, back int) int {
	lo := at
	for i := 0; i < back && lo > 0; i++ {
		_, size := utf8.DecodeLastRuneInString(s[:lo])
		lo -= size
	}
	if i := strings.LastIndex(s[lo:at], ". "); i >= 0 {
		return lo + i + 2
	}
	if i := strings.IndexByte(s[lo:at], ' '); i >= 0 {
		return lo + i + 1
	}
	return at
}

// byteOffset is the byte offset of the n-th rune of s, or len(s).
func byteOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}
