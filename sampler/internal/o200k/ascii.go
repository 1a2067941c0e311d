package o200k

// o200k_base splits text into pieces with this expression (tiktoken's,
// as github.com/tiktoken-go/tokenizer compiles it with regexp2), taking at
// each place the first alternative that matches, each backtracking as
// needed:
//
//	1  [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	2  [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	3  \p{N}{1,3}
//	4   ?[^\s\p{L}\p{N}]+[\r\n/]*
//	5  \s*[\r\n]+
//	6  \s+(?!\S)
//	7  \s+
//
// Over ASCII the letter classes are [A-Z] and [a-z] and no class overlaps
// another, so no alternative ever backtracks far; pieceEnd takes each in
// turn (its comments name them). DELETE (0x7f) is left to the codec, which
// drops it.

// class bits of an ASCII byte.
const (
	upper   = 1 << iota // [A-Z]
	lower               // [a-z]
	digit               // [0-9]
	space               // \s: \t \n \v \f \r and space
	newline             // [\r\n]
)

var classes = func() (t [128]uint8) {
	for c := 'A'; c <= 'Z'; c++ {
		t[c] |= upper
		t[c+'a'-'A'] |= lower
	}
	for c := '0'; c <= '9'; c++ {
		t[c] |= digit
	}
	for _, c := range "\t\n\v\f\r " {
		t[c] |= space
	}
	t['\r'] |= newline
	t['\n'] |= newline
	return t
}()

func is(c byte, class uint8) bool { return classes[c]&class != 0 }

// prefix is [^\r\n\p{L}\p{N}]: what may stand before a word.
func prefix(c byte) bool { return !is(c, newline|upper|lower|digit) }

// punct is [^\s\p{L}\p{N}].
func punct(c byte) bool { return !is(c, space|upper|lower|digit) }

// pieceEnd is where the piece that starts at s[i] ends; s is ASCII without
// DELETE.
func pieceEnd(s string, i int) int {
	n := len(s)
	c := s[i]

	// 1 and 2: a word, after one prefix byte or none. The prefix is taken
	// if it can be (the ? is greedy); a prefix byte is no letter, so
	// leaving it out never finds a word either. Upper then lower letters
	// is 1; upper letters alone is 2 (1 failed for want of a lower one).
	j := i
	if prefix(c) {
		j++
	}
	k := j
	for k < n && is(s[k], upper) {
		k++
	}
	m := k
	for m < n && is(s[m], lower) {
		m++
	}
	if m > j {
		return contraction(s, m)
	}

	// 3: up to three digits.
	if is(c, digit) {
		k := i + 1
		for k < n && k < i+3 && is(s[k], digit) {
			k++
		}
		return k
	}

	// 4: punctuation, after one space or none, then line breaks and
	// slashes.
	j = i
	if c == ' ' && i+1 < n && punct(s[i+1]) {
		j++
	}
	if punct(s[j]) {
		k := j + 1
		for k < n && punct(s[k]) {
			k++
		}
		for k < n && (is(s[k], newline) || s[k] == '/') {
			k++
		}
		return k
	}

	// c is white space: the run of it ends at q.
	q := i + 1
	for q < n && is(s[q], space) {
		q++
	}
	// 5: the run up to the end of its first line breaks, when it has
	// any. The codec's \s* here takes as little as it can, as if lazy
	// (regexp2 makes "\n\n \n" the pieces "\n\n" and " \n"), and this
	// follows the codec.
	for k := i; k < q; k++ {
		if is(s[k], newline) {
			for k < q && is(s[k], newline) {
				k++
			}
			return k
		}
	}
	// 6: the whole run at the end of the text; else all but its last
	// byte, which the next piece takes as its prefix (the lookahead then
	// sees white space).
	if q == n {
		return q
	}
	if q-i >= 2 {
		return q - 1
	}
	// 7: the one white-space byte before a word or punctuation that could
	// not take it.
	return q
}

// contraction extends a word ending at m by 's, 't, 're, 've, 'm, 'll or
// 'd in any case.
func contraction(s string, m int) int {
	if m+1 >= len(s) || s[m] != '\'' {
		return m
	}
	switch s[m+1] | 0x20 { // ASCII lower case
	case 's', 't', 'm', 'd':
		return m + 2
	case 'r', 'v':
		if m+2 < len(s) && s[m+2]|0x20 == 'e' {
			return m + 3
		}
	case 'l':
		if m+2 < len(s) && s[m+2]|0x20 == 'l' {
			return m + 3
		}
	}
	return m
}

// indexNonASCII is the index of the first byte of s that the scanner
// leaves to the codec (non-ASCII, or DELETE), or -1.
func indexNonASCII(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x7f {
			return i
		}
	}
	return -1
}

// cutsBefore reports whether no piece spans s[i-1] and s[i], whatever the
// rest of s: s[i-1] is a line feed and s[i] a printable ASCII byte other
// than a slash, a space or a tab. No alternative takes a line break and
// then such a byte: words and digits take no line breaks; punctuation ends
// with line breaks and slashes; a white-space run holding a line break
// ends at the end of its first line breaks (5 comes before 6 and 7), so a
// space or a tab after a line feed begins a piece. The pieces of s are then
// those of s[:i] and s[i:] (no alternative looks behind). Indented text
// (pretty-printed JSON, code) cuts at every line.
func cutsBefore(s string, i int) bool {
	return i > 0 && i < len(s) && s[i-1] == '\n' && (s[i] > ' ' && s[i] < 0x7f && s[i] != '/' || s[i] == ' ' || s[i] == '\t')
}

// lastCut is the last place at or before i where s can be cut, or 0.
func lastCut(s string, i int) int {
	for k := i; k > 0; k-- {
		if cutsBefore(s, k) {
			return k
		}
	}
	return 0
}

// nextCut is the first place after i where s can be cut, or len(s).
func nextCut(s string, i int) int {
	for k := i + 1; k < len(s); k++ {
		if cutsBefore(s, k) {
			return k
		}
	}
	return len(s)
}
