package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/tether-run/tether/runtime"
)

// keysEnv holds API keys as KEY[:TENANT],… for a server run without a key
// file.
const keysEnv = "TETHER_API_KEYS"

// loadKeys are the API keys serve accepts: the --api-keys file, else
// $TETHER_API_KEYS, else none (nil).
func loadKeys(path string) (map[string]string, error) {
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		keys, err := runtime.ParseKeys(f)
		if err != nil {
			return nil, fmt.Errorf("--api-keys %s: %w", path, err)
		}
		return keys, nil
	}
	env := os.Getenv(keysEnv)
	if env == "" {
		return nil, nil
	}
	var lines []string
	for _, kv := range strings.Split(env, ",") {
		key, tenant, _ := strings.Cut(strings.TrimSpace(kv), ":")
		lines = append(lines, key+" "+tenant)
	}
	keys, err := runtime.ParseKeys(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		return nil, fmt.Errorf("$%s: %w", keysEnv, err)
	}
	return keys, nil
}

// reloadKeys reloads the key file into keys on every SIGHUP until ctx ends;
// a file that no longer parses keeps the keys there were.
func reloadKeys(ctx context.Context, path string, keys *runtime.Keys, log *slog.Logger) {
	onHUP(ctx, func() {
		m, err := loadKeys(path)
		if err != nil {
			log.Error("API keys not reloaded", "err", err)
			return
		}
		keys.Store(m)
		log.Info("API keys reloaded", "keys", len(m))
	})
}

// onHUP calls reload on every SIGHUP until ctx ends, on a goroutine of its
// own: what serve reloads without a restart (the keys, the certificate).
func onHUP(ctx context.Context, reload func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				reload()
			}
		}
	}()
}

// loopback reports whether addr (host:port) listens on loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
