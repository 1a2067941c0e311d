package o200k

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugeSlice is n zeroed values of T in memory of its own, backed by huge
// pages where the kernel grants them (transparent huge pages, madvise), or
// nil where it cannot be had. T must hold no pointers: the collector does
// not see this memory, which is never freed (the vocabulary lives as long
// as the process).
func hugeSlice[T any](n int) []T {
	size := n * int(unsafe.Sizeof(*new(T)))
	if size == 0 {
		return nil
	}
	const huge = 2 << 20
	mapped := (size + huge - 1) / huge * huge
	b, err := unix.Mmap(-1, 0, mapped+huge, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil
	}
	// Aligned to a huge page, so that every page of it can be one.
	off := (huge - int(uintptr(unsafe.Pointer(&b[0])))%huge) % huge
	b = b[off : off+mapped]
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // a hint: where refused, small pages serve
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}
