package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeNeedsKeysOffLoopback: without API keys, serve refuses a
// non-loopback address unless --insecure, and a key file that does not
// parse stops it.
func TestServeNeedsKeysOffLoopback(t *testing.T) {
	t.Setenv(keysEnv, "")
	var stderr strings.Builder
	if code := run(context.Background(), []string{"serve", "--addr", "0.0.0.0:0"}, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), "--api-keys") {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	bad := filepath.Join(t.TempDir(), "keys")
	os.WriteFile(bad, []byte("k a b\n"), 0o600)
	stderr.Reset()
	if code := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--api-keys", bad}, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), "line 1") {
		t.Fatalf("bad key file: exit %d: %s", code, stderr.String())
	}
	if !loopback("127.0.0.1:8080") || !loopback("[::1]:80") || !loopback("localhost:1") || loopback(":8080") || loopback("0.0.0.0:80") || loopback("10.0.0.1:80") {
		t.Error("loopback misjudges an address")
	}
}

func TestLoadKeysFromEnv(t *testing.T) {
	t.Setenv(keysEnv, "sk-1:alice, sk-2")
	keys, err := loadKeys("")
	if err != nil || keys["sk-1"] != "alice" || keys["sk-2"] == "" || len(keys) != 2 {
		t.Fatalf("%v %v", keys, err)
	}
}
