package main

// The fix of the bug the fixture ships: '^' is right associative, but
// binary parses every right operand one level tighter.
var fixAssoc = edit{
	path: "parser.go",
	old:  "\t\tp.next()\n\t\ty, err := p.binary(op.prec + 1)\n",
	new:  "\t\tp.next()\n\t\tnext := op.prec + 1\n\t\tif op.rightAssoc {\n\t\t\tnext = op.prec // a ^ b ^ c is a ^ (b ^ c)\n\t\t}\n\t\ty, err := p.binary(next)\n",
}

var fixDoc = edit{
	path: "parser.go",
	old:  "// minPrec. The right operand of an operator is parsed at a higher minimum\n// precedence, so that operators of the same precedence group to the left.\n",
	new:  "// minPrec. The right operand of a left-associative operator is parsed at a\n// higher minimum precedence, so that operators of the same precedence group\n// to the left; that of a right-associative one ('^') at the same precedence,\n// so that they group to the right.\n",
}

var moreGrouping = edit{
	path: "parser_test.go",
	old:  "\t\t{\"a ^ b ^ c ^ d\", \"(a ^ (b ^ (c ^ d)))\"},\n",
	new:  "\t\t{\"a ^ b ^ c ^ d\", \"(a ^ (b ^ (c ^ d)))\"},\n\t\t{\"2 ^ 3 * 2\", \"((2 ^ 3) * 2)\"},\n\t\t{\"-a ^ b ^ c\", \"(-(a ^ (b ^ c)))\"},\n\t\t{\"2 ^ -3 ^ 2\", \"(2 ^ (-(3 ^ 2)))\"},\n\t\t{\"(2 ^ 3) ^ 2\", \"((2 ^ 3) ^ 2)\"},\n",
}

var moreEval = edit{
	path: "eval_test.go",
	old:  "\t\t{\"(-2) ^ 2\", 4},\n",
	new:  "\t\t{\"(-2) ^ 2\", 4},\n\t\t{\"(2 ^ 3) ^ 2\", 64},\n\t\t{\"2 ^ 2 ^ 3\", 256},\n\t\t{\"4 ^ 3 ^ 0\", 4},\n",
}

var feetAlias = edit{
	path: "units/units.go",
	old:  "\tif u, ok := byName[strings.TrimSuffix(l, \"s\")]; ok {\n",
	new:  "\tif n, ok := irregular[l]; ok {\n\t\tl = n\n\t}\n\tif u, ok := byName[l]; ok {\n\t\treturn u, nil\n\t}\n\tif u, ok := byName[strings.TrimSuffix(l, \"s\")]; ok {\n",
}

var irregularTable = edit{
	path: "units/units.go",
	old:  "var bySymbol, byName map[string]*Unit\n",
	new:  "var bySymbol, byName map[string]*Unit\n\n// irregular maps plural names that are not the singular plus \"s\" or \"es\".\nvar irregular = map[string]string{\n\t\"feet\":      \"foot\",\n\t\"centuries\": \"century\",\n\t\"square feet\": \"square foot\",\n\t\"ohms\":      \"ohm\",\n}\n",
}

var feetTest = edit{
	path: "units/units_test.go",
	old:  "\t\t{3, \"hours\", \"min\", 180},\n",
	new:  "\t\t{3, \"hours\", \"min\", 180},\n\t\t{3, \"feet\", \"inches\", 36},\n\t\t{1, \"centuries\", \"decades\", 10},\n\t\t{1, \"square feet\", \"square inches\", 144},\n",
}

var sessions = []session{
	{
		name: "calc-fix-12",
		task: "In the calc repository, `2^3^2` evaluates to 64 but the README says `^` is right associative, so it should be 512. Find the bug, fix it, and make sure the tests pass.",
		steps: []step{
			s("I'll start by looking at the repository layout and running the tests to see what fails.", ls("."), sh("go test ./...")),
			s("The parser groups `^` to the left. Let me read the parser and the operator table.", rf("parser.go"), rf("token.go")),
			s("", gr(`rightAssoc|binary\(`, ".")),
			s("`binaryOps` marks `^` as `rightAssoc`, but `binary` never reads the flag: it always parses the right operand at `op.prec + 1`. Let me check what the tests expect.", rf("parser_test.go")),
			s("I'll parse the right operand of a right-associative operator at the same precedence.", patch(fixAssoc)),
			s("", sh("go test -count=1 -v ./...")),
			s("All tests pass. Let me make sure nothing else calls `binary` with its own assumption.", gr(`\.binary\(|precUnary|precPower`, ".")),
			s("", sh("gofmt -l . && go vet ./... && go test -count=1 -v ./...")),
			s("Let me try a few expressions through the command line.", sh(`for e in '2^3^2' '-2^2' '2^-1' '(2^3)^2' 'a = 2; a^a^a' '2^3*2'; do printf '%s => ' "$e"; go run ./cmd/calc "$e"; done`)),
			s("The results match the README's rules; a last look at what it documents for `^`.", rf("README.md")),
			s("`2^3^2` now evaluates to 512.\n\nThe bug was in `parser.go`, `(*Parser).binary`: it parsed the right operand of every operator at `op.prec + 1`, which makes all operators left associative, although `token.go` marks `^` as `rightAssoc`. The right operand of a right-associative operator is now parsed at the operator's own precedence, so `2^3^2` is `2^(3^2)` = 512 and `a^b^c^d` groups as `a^(b^(c^d))`; `-2^2` is still -4.\n\n`gofmt`, `go vet` and `go test ./...` are clean; `TestParseGrouping` and `TestEval`, which failed before, now pass."),
		},
	},
	{
		name: "calc-fix-24",
		task: "The calc tests are failing (`go test ./...`). Please find the root cause, fix it properly, add regression tests for the edge cases around it, and keep the docs in sync.",
		steps: []step{
			s("Let me get oriented: the layout, the README, and the failing tests.", ls("."), rf("README.md"), sh("go test ./...")),
			s("Both failures are about grouping of `^`. I'll read the parser with the token definitions and the AST printer the tests compare against.", rf("parser.go"), rf("token.go"), rf("ast.go")),
			s("", gr(`precPower|precUnary|rightAssoc`, ".")),
			s("Now the tests that fail, and the evaluator tests that use `^`.", rf("parser_test.go"), rf("eval_test.go")),
			s("Before changing the parser, let me check how the lexer produces `^` and how `Caret` is evaluated.", rf("lexer.go"), rf("eval.go")),
			s("The root cause: `binary` parses every right operand at `op.prec + 1`, ignoring `rightAssoc`. Fixing it there.", patch(fixAssoc)),
			s("", sh("go test ./... 2>&1 | tail -n 20 && go test -count=1 -v -run 'Grouping|Eval' .")),
			s("The failing tests pass. Now regression tests for the edges: power next to `*`, unary minus in a chain, and explicit parentheses.", patch(moreGrouping, moreEval)),
			s("Let me re-read the test table to check the new cases sit with the other power cases.", rf("parser_test.go")),
			s("", sh("go test -count=1 -v ./...")),
			s("Let me make sure no other code path builds `^` nodes on its own.", gr(`Caret`, ".")),
			s("Only the parser and evaluator touch it. The doc comment of `binary` now describes the old behaviour; updating it.", patch(fixDoc)),
			s("", rf("parser.go")),
			s("The README already documents `^` as right associative. Let me check the builtins for `pow`, which should agree with `^`, and the values they return.", rf("builtins.go"), rf("value.go")),
			s("", gr(`pow|Pow`, ".")),
			s("`pow` uses `math.Pow` like `^`. Full check:", sh("gofmt -l . && go vet ./... && go test -count=1 -v ./...")),
			s("And an end-to-end check through the command line:", sh(`for e in '2^3^2' '-2^2' '2^-3^2' '(2^3)^2' 'pow(2, 3^2)' '2^3*2'; do printf '%s => ' "$e"; go run ./cmd/calc "$e"; done`)),
			s("Fixed, with regression tests.\n\n**Root cause.** `(*Parser).binary` in `parser.go` parsed the right operand of every binary operator at `op.prec + 1`. That is right for the left-associative operators but wrong for `^`, which `token.go` declares `rightAssoc`: `2^3^2` parsed as `(2^3)^2` = 64 instead of `2^(3^2)` = 512.\n\n**Fix.** The right operand of a right-associative operator is now parsed at the operator's own precedence. Unary minus is unchanged (`-2^2` = -4), and the doc comment of `binary` explains both cases.\n\n**Tests.** `TestParseGrouping` gains `2 ^ 3 * 2`, `-a ^ b ^ c`, `2 ^ -3 ^ 2` and `(2 ^ 3) ^ 2`; `TestEval` gains `(2 ^ 3) ^ 2`, `2 ^ 2 ^ 3` and `4 ^ 3 ^ 0`. `gofmt`, `go vet` and `go test ./...` are clean, and the README already documents the behaviour now implemented."),
		},
	},
	{
		name: "calc-audit-50",
		task: "`go test ./...` fails in the calc repository. Fix it, then review the parser, the evaluator and the units package for related correctness problems: fix what you find, add regression tests for anything you change, and give me a summary.",
		steps: []step{
			s("I'll start with the layout, the docs and the current test results.", ls("."), rf("README.md"), sh("go test ./...")),
			s("Two failing tests, both about how `^` groups. Reading the whole front end: tokens, lexer, parser and AST.", rf("token.go"), rf("lexer.go"), rf("parser.go"), rf("ast.go")),
			s("", gr(`rightAssoc|prec[A-Z]`, ".")),
			s("`binary` ignores `rightAssoc`. Before fixing, let me read the tests for the parser and the lexer.", rf("parser_test.go"), rf("lexer_test.go")),
			s("I'll fix the associativity: the right operand of `^` is parsed at its own precedence.", patch(fixAssoc)),
			s("", sh("go test -count=1 -v ./...")),
			s("Everything passes. Now the evaluator, values, builtins and formatting.", rf("eval.go"), rf("value.go"), rf("builtins.go"), rf("format.go")),
			s("", rf("eval_test.go")),
			s("The command line and the error types, to see how errors reach the user.", rf("cmd/calc/main.go"), rf("errors.go")),
			s("", gr(`errors\.Is|Err[A-Z][a-z]+`, ".")),
			s("Let me see every function of the package at a glance, to spot other paths that build or evaluate operators.", gr(`^func `, ".")),
			s("", gr(`Caret|math\.Pow`, ".")),
			s("`pow` and `^` both use `math.Pow`, consistently. Now the units package.", rf("units/units.go"), rf("units/units_test.go")),
			s("", rf("units/table.go")),
			s("The table is generated and large. Let me check the length units and how names are looked up.", gr(`Dim: Length`, "units")),
			s("Symbols must be unique and case-sensitive; let me scan all of them, and the other common dimensions.", gr(`Symbol: "`, "units"), gr(`Dim: (Mass|Volume|Time|Data)`, "units"), gr(`Dim: (Energy|Power|Pressure)`, "units")),
			s("", sh("go doc -all ./units")),
			s("`Lookup` handles plurals by trimming `s` or `es`, so irregular plurals like `feet` fail. Let me confirm.", sh(`for e in 'convert(3, "feet", "in")' 'convert(3, "foot", "in")' 'convert(1, "centuries", "yr")' 'convert(2, "inches", "cm")'; do printf '%s => ' "$e"; go run ./cmd/calc "$e" 2>&1; done`)),
			s("Confirmed: `feet` and `centuries` are unknown. I'll add a small table of irregular plurals, consulted before the suffix rules.", patch(irregularTable, feetAlias)),
			s("", sh("gofmt -l . ; go vet ./units/ && go test -count=1 -v ./units/")),
			s("`gofmt` flags units.go: the map literal's alignment. Let me look at it.", rf("units/units.go")),
			s("", patch(edit{
				path: "units/units.go",
				old:  "\t\"feet\":      \"foot\",\n\t\"centuries\": \"century\",\n\t\"square feet\": \"square foot\",\n\t\"ohms\":      \"ohm\",\n",
				new:  "\t\"feet\":        \"foot\",\n\t\"centuries\":   \"century\",\n\t\"square feet\": \"square foot\",\n\t\"ohms\":        \"ohm\",\n",
			})),
			s("Now regression tests for the plurals and for the parser edge cases.", patch(feetTest), patch(moreGrouping, moreEval)),
			s("Let me re-read both test files around the new cases.", rf("parser_test.go"), rf("eval_test.go")),
			s("", sh("gofmt -l . && go vet ./... && go test -count=1 -v ./...")),
			s("All green. Let me re-read the units tests to check the new cases read well.", rf("units/units_test.go")),
			s("Updating the doc comment of `binary`, which still describes the old grouping.", patch(fixDoc)),
			s("Let me re-read the final parser and make sure the comment and code agree.", rf("parser.go")),
			s("Checking the README's unit examples and the command line still behave.", sh(`for e in '2^3^2' '-2^2' 'convert(5, "km", "mi")' 'convert(3, "feet", "in")' 'convert(1, "square feet", "square inches")' 'x = 3; y = x ^ 2; sqrt(y + 16)'; do printf '%s => ' "$e"; go run ./cmd/calc "$e" 2>&1; done`)),
			s("`convert` takes its unit names as strings; let me re-check how builtins validate string arguments now that names may contain spaces.", rf("builtins.go")),
			s("", sh("go test -count=1 -v -race ./...")),
			s("Let me check the README's description of units and plurals against the new behaviour.", rf("README.md")),
			s("One more scan for symbol lookups that assume regular plurals elsewhere.", gr(`TrimSuffix|ToLower`, ".")),
			s("", sh("go doc -all . | head -n 120")),
			s("", sh("gofmt -l . && go vet ./... && go test -count=1 -v ./... && go test -count=1 -race ./... 2>&1 | tail -n 5")),
			s("Done. Summary:\n\n1. **Failing tests: `^` grouped to the left.** `(*Parser).binary` parsed every right operand at `op.prec + 1`, ignoring the `rightAssoc` flag that `token.go` sets on `^`, so `2^3^2` was 64. Right-associative operators now parse their right operand at their own precedence (512), and the doc comment of `binary` describes both cases. Regression tests: `2 ^ 3 * 2`, `-a ^ b ^ c`, `2 ^ -3 ^ 2`, `(2 ^ 3) ^ 2` in `TestParseGrouping`; `(2 ^ 3) ^ 2`, `2 ^ 2 ^ 3`, `4 ^ 3 ^ 0` in `TestEval`.\n2. **Units: irregular plurals.** `units.Lookup` only trimmed `s`/`es`, so `feet`, `centuries` and `square feet` were unknown units. An `irregular` table maps them to their singular before the suffix rules. Tests: feet to inches, centuries to decades, square feet to square inches.\n\nReviewed without changes: the lexer (numbers, strings, escapes, positions), the evaluator (division and modulo by zero, type checks of builtin arguments), `Format`, and the unit table (symbols are unique, `TestSymbolsUnique`). `gofmt`, `go vet`, `go test ./...` and `go test -race ./...` are clean."),
		},
	},
}
