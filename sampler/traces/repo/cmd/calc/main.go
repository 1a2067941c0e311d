// Command calc evaluates expressions.
//
//	calc '2 * (3 + 4)'
//	echo 'sqrt(2)' | calc
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"example.com/calc"
)

func main() {
	if len(os.Args) > 1 {
		src := strings.Join(os.Args[1:], " ")
		v, err := calc.Eval(src)
		if err != nil {
			fmt.Fprintln(os.Stderr, "calc:", err)
			os.Exit(1)
		}
		fmt.Println(calc.Format(v))
		return
	}
	env := calc.NewEnv()
	sc := bufio.NewScanner(os.Stdin)
	status := 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		prog, err := calc.Parse(line)
		if err == nil {
			var v calc.Value
			if v, err = calc.Run(prog, env); err == nil {
				fmt.Println(calc.Format(v))
				continue
			}
		}
		fmt.Fprintln(os.Stderr, "calc:", err)
		status = 1
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "calc:", err)
		os.Exit(1)
	}
	os.Exit(status)
}
