package clienttools_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tether-run/tether/clienttools"
)

// Example runs the calls a model makes against a scratch repository.
func Example() {
	dir, _ := os.MkdirTemp("", "clienttools-example-")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello\nworld\nfrom\nthe\nexample\n"), 0o644)

	tools := &clienttools.Tools{Dir: dir}
	for _, call := range []struct{ name, args string }{
		{"read_file", `{"path":"hello.txt"}`},
		{"apply_patch", `{"patch":"*** Begin Patch\n*** Update File: hello.txt\n@@\n hello\n-world\n+gophers\n*** End Patch\n"}`},
		{"shell", `{"command":"cat hello.txt"}`},
		{"read_file", `{"path":"../secret"}`},
	} {
		out, err := tools.Run(context.Background(), call.name, call.args)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Print(out)
	}
	// Output:
	//    1	hello
	//    2	world
	//    3	from
	//    4	the
	//    5	example
	// Success. Updated the following files:
	// M hello.txt
	//
	// hello.txt, lines 1-5 after the patch:
	//    1	hello
	//    2	gophers
	//    3	from
	//    4	the
	//    5	example
	// $ cat hello.txt
	// hello
	// gophers
	// from
	// the
	// example
	// [exit code 0]
	// error: "../secret": path outside the working directory
}
