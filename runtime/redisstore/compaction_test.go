package redisstore

import (
	"bytes"
	"testing"
)

// TestCompactionKey: two servers on one Redis get the same 32-byte key,
// the one the first to ask drew.
func TestCompactionKey(t *testing.T) {
	t.Parallel()
	a, rd := newCheckpointStore(t)
	b, err := New(rd.URL(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ka, err := a.CompactionKey(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	kb, err := b.CompactionKey(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(ka) != 32 || !bytes.Equal(ka, kb) {
		t.Fatalf("keys %x and %x: want one 32-byte key", ka, kb)
	}
}
