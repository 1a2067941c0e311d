package runtime

import "strconv"

func indexParam(param string, i int) string { return param + "[" + strconv.Itoa(i) + "]" }

func ptr[T any](v T) *T { return &v }
