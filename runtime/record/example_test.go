package record_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/record"
)

// A server records each response's request and events; the log reads back
// line by line.
func Example() {
	var log bytes.Buffer
	w := record.New(&log)
	srv, err := runtime.NewServer(runtime.Options{Recorder: w})
	if err != nil {
		panic(err)
	}
	hs := httptest.NewServer(srv)
	resp, err := http.Post(hs.URL+"/v1/responses", "application/json", strings.NewReader(`{"model":"tether-scripted","input":"Hello"}`))
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	srv.Shutdown(context.Background())
	hs.Close()
	w.Close()

	rd, err := record.NewReader(&log)
	if err != nil {
		panic(err)
	}
	for {
		l, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			panic(err)
		}
		switch l.Kind {
		case record.KindRequest:
			fmt.Println(l.Kind, l.Path.Transport, l.Path.Design)
		case record.KindEvent:
			fmt.Println(l.Kind, l.EventType())
		}
	}
	// Output:
	// request http stateless
	// event response.created
	// event response.in_progress
	// event response.output_item.added
	// event response.content_part.added
	// event response.output_text.delta
	// event response.output_text.done
	// event response.content_part.done
	// event response.output_item.done
	// event response.completed
}
