package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
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
		c.printUsage(stdout)
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

var badValue = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-([^:]+): `)

// explain is a parse error with what a good value looks like.
func (c *command) explain(err error) string {
	m := badValue.FindStringSubmatch(err.Error())
	if m == nil {
		return strings.Replace(err.Error(), "flag provided but not defined", "no such flag", 1)
	}
	value, name := m[1], m[2]
	want := "see its usage"
	if f := c.Lookup(name); f != nil {
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
