package o200k

import (
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

// codecTokens is what the codec makes of s: the reference.
func codecTokens(t testing.TB, s string) ([]uint32, []string) {
	t.Helper()
	c, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	ids, toks, err := c.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uint32, len(ids))
	for i, id := range ids {
		out[i] = uint32(id)
	}
	return out, toks
}

func encoder(t testing.TB) *Encoder {
	t.Helper()
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// check fails t unless e tokenizes s exactly as the codec does.
func check(t testing.TB, e *Encoder, s string) {
	t.Helper()
	wantIDs, wantToks := codecTokens(t, s)
	var ids []uint32
	var toks []string
	e.Each(s, func(id uint32, piece string) {
		ids = append(ids, id)
		toks = append(toks, piece)
	})
	if !slices.Equal(ids, wantIDs) || !slices.Equal(toks, wantToks) {
		i := 0
		for i < min(len(toks), len(wantToks)) && toks[i] == wantToks[i] {
			i++
		}
		t.Fatalf("%d bytes: tokens differ from the codec's at token %d:\n got %q\nwant %q\nin %.200q",
			len(s), i, toks[i:min(i+8, len(toks))], wantToks[i:min(i+8, len(wantToks))], s)
	}
	if n := e.Count(s); n != len(wantIDs) {
		t.Fatalf("Count = %d, want %d", n, len(wantIDs))
	}
}

// fragments put every class of byte next to every other: words in each
// case with contractions, digits, punctuation, every white space, line
// breaks before the places the Encoder cuts, and non-ASCII text.
var fragments = []string{
	"", " ", "  ", "   ", "\t", "\n", "\n\n", " \n", "\n ", "\r\n", "\r", " \t\n  ", "\v", "\f", "\x1c", "\x1f", "\x00",
	"Hello", "world", " the", "I", "HTTP", "HTTPServer", "camelCase", "x", "Z",
	"'s", "'S", "'t", "'re", "'RE", "'Ve", "'m", "'ll", "'Ll", "'d", "'", "''", "'x",
	"0", "7", "12345", "3.14", "1e9", "-", "--", "...", "/", "//", "/*", "*/", "<", ">", "|", "<|", "|>",
	"{", "}", "(", ")", `"`, `\"`, "\\", "```", "#", "# Tools", ":=", "!=", "&&", ";", ",", ".\n", ")\n",
	"\nfunc", "\n//", "\n\n\n", "\n}", "\n\tif", "\n'", "\n's", "\n123", "\n/", "\n\t\r\n", "\n \t",
	"ß", "ÉCOLE", "é", "\u0301", "\u200d", "\u00a0", "\u0085", "\u2028", "\u3000", "😀", "日本語", "русский",
	"\x7f", "a\x7fb",
}

func randText(rng *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		if rng.IntN(40) == 0 {
			b.WriteRune(rune(rng.IntN(0x3000)))
			continue
		}
		if rng.IntN(10) == 0 {
			b.WriteByte(byte(rng.IntN(0x80)))
			continue
		}
		b.WriteString(fragments[rng.IntN(len(fragments))])
	}
	return b.String()
}

// TestEncoder holds the Encoder to the codec on real text (every Go and
// Markdown file of this repository, and the sampler's test data) and on
// random texts built to put odd neighbours side by side.
func TestEncoder(t *testing.T) {
	e := encoder(t)
	root := filepath.Join("..", "..", "..")
	files := 0
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return fs.SkipDir
		}
		if ext := filepath.Ext(path); ext != ".go" && ext != ".md" && ext != ".txt" && ext != ".json" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		check(t, e, string(b))
		files++
		return nil
	})
	if files < 100 {
		t.Fatalf("only %d files under %s", files, root)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		check(t, e, randText(rng, 1+rng.IntN(60)))
	}
}

// FuzzEncoder holds the Encoder to the codec on any text.
func FuzzEncoder(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		f.Add(randText(rng, 20))
	}
	f.Add("func f() {\n\treturn x's\n}\n")
	e := encoder(f)
	f.Fuzz(func(t *testing.T, s string) { check(t, e, s) })
}

// TestLongPiece: pieces too long for the quadratic merge (a long run of
// one letter, of digits, of punctuation) come out as the codec's.
func TestLongPiece(t *testing.T) {
	e := encoder(t)
	for _, s := range []string{strings.Repeat("a", 5000), strings.Repeat("=", 300), strings.Repeat("xyzzy", 100), strings.Repeat(" ", 400) + "x"} {
		check(t, e, s)
	}
}

// BenchmarkEncode tokenizes a 10 KB mix of Go source and English prose
// (the sampler's test blob) with the Encoder and with the codec.
func BenchmarkEncode(b *testing.B) {
	blob, err := os.ReadFile("../../testdata/blob.txt")
	if err != nil {
		b.Fatal(err)
	}
	s := string(blob)
	e := encoder(b)
	c, _ := tokenizer.Get(tokenizer.O200kBase)
	var dst []uint32
	for _, bc := range []struct {
		name string
		run  func()
	}{
		{"encoder", func() { dst = e.Append(dst[:0], s) }},
		{"codec", func() { c.Encode(s) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			b.ReportAllocs()
			for b.Loop() {
				bc.run()
			}
		})
	}
}

// BenchmarkEncodeCold tokenizes 2 KB of the blob (a tool output's size)
// after the caches were filled with something else, as a round trip finds
// them after the client's tool ran: the vocabulary's lookups then miss.
func BenchmarkEncodeCold(b *testing.B) {
	blob, err := os.ReadFile("../../testdata/blob.txt")
	if err != nil {
		b.Fatal(err)
	}
	e := encoder(b)
	other := make([]byte, 64<<20)
	var dst []uint32
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for j := 0; j < len(other); j += 64 {
			other[j]++
		}
		at := (i * 2048) % (len(blob) - 2048)
		s := string(blob[at : at+2048])
		b.StartTimer()
		dst = e.Append(dst[:0], s)
	}
}

// TestVocab: every piece of the vocabulary is found with its id, and
// strings that are no token are not found.
func TestVocab(t *testing.T) {
	e := encoder(t)
	c, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for i := range uint(vocabSize) {
		piece, err := c.Decode([]uint{i})
		if err != nil {
			continue
		}
		if id, ok := e.ranks.lookup(piece); !ok || id != uint32(i) {
			t.Fatalf("piece %q (id %d): lookup gave %d, %v", piece, i, id, ok)
		}
		found++
	}
	if found < vocabSize/2 {
		t.Fatalf("only %d pieces", found)
	}
	for _, s := range []string{"", "zqxjzqxjzqxj", strings.Repeat("a", 200), "the quick brown fox jumps"} {
		if id, ok := e.ranks.lookup(s); ok {
			t.Errorf("%q found as token %d", s, id)
		}
	}
}

// TestEncoderIndentedNonASCII: indented lines (no line starts with a
// printable byte) for more than the codec is given at once, then a
// character the scanner leaves to the codec: the text is cut at its lines,
// not at a byte count inside a run of spaces (which tokenized 11 spaces as
// 6 and 5 in a pretty-printed JSON Schema).
func TestEncoderIndentedNonASCII(t *testing.T) {
	e := encoder(t)
	line := "            \"type\": \"number\",\n"
	for _, n := range []int{1, maxCodecRun/len(line) + 7, 3 * maxCodecRun / len(line)} {
		check(t, e, "{\n"+strings.Repeat(line, n)+"            \"d\": \"a × b\"\n}")
	}
}

// TestMergeCache: a piece merged again is read off the cache with the same
// tokens, and a piece that finds its slot holding another is merged anew:
// the tokens stay the codec's, a first time and again, with a cache too
// small for the text (every slot fought over).
func TestMergeCache(t *testing.T) {
	blob, err := os.ReadFile("../../testdata/blob.txt")
	if err != nil {
		t.Fatal(err)
	}
	e := *encoder(t)
	e.merges = new(mergeCache) // its own, empty
	for range 2 {
		check(t, &e, string(blob))
	}
	held := 0
	for i := range e.merges.slots {
		if m := e.merges.slots[i].Load(); m != nil {
			held++
			if got := e.merges.get(m.piece, e.ranks.hash(m.piece)); got != m {
				t.Fatalf("%q: its slot holds it, get does not find it", m.piece)
			}
		}
	}
	if held == 0 {
		t.Fatal("nothing merged was kept")
	}
	words := strings.Fields(string(blob))
	var b strings.Builder
	for i := range 4 * mergeSlots {
		b.WriteString(words[i%len(words)])
		b.WriteString("Qx")
		b.WriteString(strings.Repeat("z", i%7))
		b.WriteByte(' ')
	}
	for range 2 {
		check(t, &e, b.String())
	}
}
