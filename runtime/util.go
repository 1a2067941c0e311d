package runtime

import (
	"strings"
)

func ptr[T any](v T) *T { return &v }

// andList is "a, b and c".
func andList(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}
