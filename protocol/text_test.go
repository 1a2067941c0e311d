package protocol

import "testing"

// FuzzText: a string text reads, the codec reads the same.
func FuzzText(f *testing.F) {
	for _, s := range []string{
		`"package main\n\nfunc main() {\n\tif a \u003c b \u0026\u0026 c \u003e d {}\n}\n"`,
		`"plain ASCII, long enough to take whole words at a time"`,
		`"\"q\" \\ \/ \b \f \r é 世界 \ud83d\ude00"`,
		`"\ud83d"`, `"\ude00\ud83d"`, `"\ud83d\u0041"`, `"\u00"`, `"\x"`,
		"\"tab\there\"", "\"\xff\"", `"unterminated`, ` "spaced" `, `"a""b"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := deltaScanner{b: data}
		got, ok := s.text()
		if !ok {
			return
		}
		var want string
		if err := unmarshal(data[:s.i], &want); err != nil {
			t.Fatalf("text read %q from %q, which the codec refuses: %v", got, data[:s.i], err)
		}
		if got != want {
			t.Fatalf("text read %q from %q, the codec %q", got, data[:s.i], want)
		}
	})
}
