package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// command is a subcommand's command line: its flags, what it does, an
// example, and how many arguments it takes. Every subcommand parses
// through it, so that all behave alike: -h or --help prints the usage on
// stdout and exits 0; a bad flag, a bad value or a stray argument is an
// error on stderr that says what a good one looks like, exit 2.
type command struct {
	*flag.FlagSet
	usage   string // "Usage: tether NAME [flags]" and what it does
	example string // one command line per line
	maxArgs int    // positional arguments taken at most; -1: any number
}

func newCommand(name, usage, example string, maxArgs int) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse says what went wrong
	return &command{FlagSet: fs, usage: usage, example: example, maxArgs: maxArgs}
}

// parse reads args; ok false means exit with code.
func (c *command) parse(args []string, stdout, stderr io.Writer) (code int, ok bool) {
	err := c.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		if ref, ok := stdout.(referenceWriter); ok {
			c.printReference(ref)
		} else {
			c.printUsage(stdout)
		}
		return 0, false
	case err != nil:
		c.fail(stderr, "%s", c.explain(err))
		return 2, false
	case c.maxArgs >= 0 && c.NArg() > c.maxArgs:
		extra := c.Args()[c.maxArgs:]
		if c.maxArgs == 0 {
			c.fail(stderr, "unexpected argument %q: tether %s takes flags only (and flags go before arguments)", extra[0], c.Name())
		} else {
			c.fail(stderr, "unexpected argument %q: tether %s takes %d (and flags go before arguments)", extra[0], c.Name(), c.maxArgs)
		}
		return 2, false
	}
	return 0, true
}

// fail says what is wrong with the command line, and where help is.
func (c *command) fail(stderr io.Writer, format string, args ...any) {
	fmt.Fprintf(stderr, "tether %s: %s\nRun \"tether %s -h\" for its usage.\n", c.Name(), fmt.Sprintf(format, args...), c.Name())
}

// printUsage writes what the command does, every flag, and the example.
func (c *command) printUsage(w io.Writer) {
	fmt.Fprint(w, strings.TrimRight(c.usage, "\n")+"\n\nFlags:\n")
	c.SetOutput(w)
	c.PrintDefaults()
	c.SetOutput(io.Discard)
	if c.example != "" {
		fmt.Fprint(w, "\nExample:\n")
		for _, line := range strings.Split(strings.TrimSpace(c.example), "\n") {
			fmt.Fprintf(w, "  %s\n", strings.TrimSpace(line))
		}
	}
}

// referenceWriter is a stdout that asks for a command's usage as its
// section of the Markdown command reference, docs/cli.md, which is
// generated from the flags themselves (TestCLIReference) so that it
// cannot drift from them.
type referenceWriter struct{ io.Writer }

// printReference writes the command's reference section: what it does,
// a table of its flags, and its example.
func (c *command) printReference(w io.Writer) {
	usage := strings.TrimRight(c.usage, "\n")
	first, rest, _ := strings.Cut(usage, "\n")
	fmt.Fprintf(w, "## tether %s\n\n```\n%s\n```\n\n%s\n\n", c.Name(), strings.TrimPrefix(first, "Usage: "), strings.TrimSpace(rest))
	var flags int
	c.VisitAll(func(*flag.Flag) { flags++ })
	if flags > 0 {
		fmt.Fprint(w, "| flag | default | meaning |\n|---|---|---|\n")
	}
	c.VisitAll(func(f *flag.Flag) {
		def := f.DefValue
		if def != "" {
			def = "`" + def + "`"
		}
		fmt.Fprintf(w, "| `--%s` | %s | %s |\n", f.Name, def, strings.ReplaceAll(f.Usage, "|", "\\|"))
	})
	if c.example != "" {
		fmt.Fprint(w, "\n```sh\n")
		for _, line := range strings.Split(strings.TrimSpace(c.example), "\n") {
			fmt.Fprintln(w, strings.TrimSpace(line))
		}
		fmt.Fprint(w, "```\n")
	}
}

var badValue = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-([^:]+): `)

// explain is a parse error with what a good value looks like.
func (c *command) explain(err error) string {
	m := badValue.FindStringSubmatch(err.Error())
	if m == nil {
		msg := strings.Replace(err.Error(), "flag provided but not defined", "no such flag", 1)
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
			if near := c.nearest(name); near != "" {
				msg += "; did you mean --" + near + "?"
			}
		}
		return msg
	}
	value, name := m[1], m[2]
	want := "see its usage"
	if f := c.Lookup(name); f != nil {
		if _, ok := f.Value.(interface{ isByteSize() }); ok {
			return fmt.Sprintf("--%s %q: want bytes, a whole number or one with a unit, such as 32MiB or 1500KB", name, value)
		}
		if g, ok := f.Value.(flag.Getter); ok {
			switch g.Get().(type) {
			case time.Duration:
				want = "want a duration with its unit, such as 150ms, 2s or 1m30s"
			case int, int64, uint, uint64:
				want = "want a whole number, such as " + f.DefValue
			case float64:
				want = "want a number, such as " + f.DefValue
			case bool:
				want = "want true or false"
			}
		}
	}
	return fmt.Sprintf("--%s %q: %s", name, value, want)
}

// nearest is the command's flag whose name is closest to name, within two
// edits (a letter left out, added, changed), or "".
func (c *command) nearest(name string) string {
	best, bestDist := "", 3
	c.VisitAll(func(f *flag.Flag) {
		if d := editDistance(strings.TrimPrefix(name, "-"), f.Name); d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance between a and b, by bytes.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// sizeUnits are the units a byte size may carry (sizeHelp says the same):
// the IEC ones are powers of 1024, the SI ones powers of 1000.
var sizeUnits = []struct {
	suffix string
	factor int64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1},
}

// sizeHelp ends the usage of every byte-size flag.
const sizeHelp = " (a `size`: bytes, or with a unit, such as 64KiB or 2MB)"

// parseSize reads a size in bytes: a whole number, or one followed by a
// unit of sizeUnits, such as 32MiB or 1500KB.
func parseSize(s string) (int64, error) {
	num, factor := s, int64(1)
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, factor = n, u.factor
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > math.MaxInt64/factor || n < math.MinInt64/factor {
		return 0, fmt.Errorf("%q is not a size: want bytes, a whole number or one with a unit, such as 32MiB or 1500KB", s)
	}
	return n * factor, nil
}

// byteSize is a flag.Value of a size in bytes, read by parseSize and shown
// as a plain number. Its Get is the number in T, as an int flag's is.
type byteSize[T int | int64] struct{ p *T }

// bytesVar defines a byte-size flag that stores into p.
func bytesVar[T int | int64](fs *flag.FlagSet, p *T, name string, value T, usage string) {
	*p = value
	fs.Var(byteSize[T]{p}, name, usage+sizeHelp)
}

// bytesFlag defines a byte-size flag and returns where it stores.
func bytesFlag(fs *flag.FlagSet, name string, value int, usage string) *int {
	p := new(int)
	bytesVar(fs, p, name, value, usage)
	return p
}

func (b byteSize[T]) String() string {
	if b.p == nil { // flag.PrintDefaults asks a zero value
		return "0"
	}
	return strconv.FormatInt(int64(*b.p), 10)
}

func (b byteSize[T]) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	if int64(T(n)) != n {
		return fmt.Errorf("%q is too large", s)
	}
	*b.p = T(n)
	return nil
}

func (b byteSize[T]) Get() any { return *b.p }

func (b byteSize[T]) isByteSize() {}

// urlList is a flag.Value that takes one URL each time its flag is given.
type urlList struct{ p *[]string }

func (l urlList) String() string {
	if l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

func (l urlList) Set(s string) error {
	if s == "" {
		return errors.New("an empty URL")
	}
	*l.p = append(*l.p, s)
	return nil
}
