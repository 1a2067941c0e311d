package redisstore_test

import (
	"context"
	"log"
	"net/http"
	"time"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/redisstore"
)

// Servers that share one Redis continue each other's stored responses:
// each is made with a Store of its own on the same database.
func ExampleNew() {
	st, err := redisstore.New("redis://127.0.0.1:6379/0", redisstore.Options{TTL: 7 * 24 * time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if err := st.Ping(context.Background()); err != nil {
		log.Fatal(err) // store_unavailable: Redis did not answer within Options.Timeout
	}
	srv, err := runtime.NewServer(runtime.Options{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", srv))
}
