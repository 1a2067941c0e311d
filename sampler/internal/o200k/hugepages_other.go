//go:build !linux

package o200k

// hugeSlice is nil: huge pages are asked for on Linux only.
func hugeSlice[T any](int) []T { return nil }
