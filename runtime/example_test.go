package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/runtime"
)

// A Server is an http.Handler: mount it, then talk to it over HTTP or
// WebSocket on /v1/responses.
func ExampleNewServer() {
	srv, err := runtime.NewServer(runtime.Options{})
	if err != nil {
		panic(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Shutdown(context.Background())

	resp, err := http.Post(hs.URL+"/v1/responses", "application/json",
		strings.NewReader(`{"model":"tether-scripted","input":"Hello"}`))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Output []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	json.NewDecoder(resp.Body).Decode(&r)
	fmt.Println(r.Status, r.Output[0].Content[0].Text)
	// Output: completed You said: "Hello"
}

// Embedded in a program's own http.Server, the Server is the handler (or
// one route of it). At exit it shuts down first: http.Server.Shutdown
// neither closes hijacked WebSocket connections nor ends responses still
// streaming, and would wait for them.
func Example_httpServer() {
	srv, err := runtime.NewServer(runtime.Options{
		HostedTools: nil, // e.g. websearch.New(index)
		Store:       runtime.NewMemoryStore(runtime.MemoryStoreOptions{MaxRecords: 1000}),
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	hs := &http.Server{Handler: mux}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	resp, err := http.Post("http://"+ln.Addr().String()+"/v1/responses", "application/json",
		strings.NewReader(`{"model":"tether-scripted","input":"ping"}`))
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Status)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(ctx) // sessions, streams and suspended rollouts
	hs.Shutdown(ctx)  // then the listener and idle connections
	fmt.Println(<-served)
	// Output:
	// 200 OK
	// http: Server closed
}

// Over WebSocket each turn is a response.create frame; a continuation sends
// only new input with previous_response_id, served from the connection cache.
func ExampleServer_webSocket() {
	srv, _ := runtime.NewServer(runtime.Options{})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Shutdown(context.Background())

	ctx := context.Background()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http")+"/v1/responses", nil)
	if err != nil {
		panic(err)
	}
	defer c.CloseNow()
	turn := func(frame string) (id, status string) {
		c.Write(ctx, websocket.MessageText, []byte(frame))
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				panic(err)
			}
			var ev struct {
				Type     string `json:"type"`
				Response struct{ ID, Status string }
			}
			json.Unmarshal(b, &ev)
			if ev.Type == "response.completed" || ev.Type == "error" {
				return ev.Response.ID, ev.Type
			}
		}
	}
	id, status := turn(`{"type":"response.create","model":"tether-scripted","store":false,"input":"Remember: papaya."}`)
	fmt.Println(status)
	_, status = turn(`{"type":"response.create","model":"tether-scripted","store":false,"previous_response_id":"` + id + `","input":"What was the word?"}`)
	fmt.Println(status)
	// Output:
	// response.completed
	// response.completed
}

// Behind a TLS listener of the program's own, TLSListener goes under it,
// so that the server's flushers write its WebSockets' TLS records without
// waiting, as they write plain ones. httptest's StartTLS puts TLS over
// the listener it is given, as http.Server.ServeTLS does.
func ExampleTLSListener() {
	srv, _ := runtime.NewServer(runtime.Options{})
	hs := httptest.NewUnstartedServer(srv)
	hs.Listener = runtime.TLSListener(hs.Listener) // http.Server.ServeTLS(runtime.TLSListener(ln), cert, key)
	hs.StartTLS()
	defer hs.Close()
	defer srv.Shutdown(context.Background())

	ctx := context.Background()
	c, _, err := websocket.Dial(ctx, "wss"+strings.TrimPrefix(hs.URL, "https")+"/v1/responses",
		&websocket.DialOptions{HTTPClient: hs.Client()}) // trusts the test certificate
	if err != nil {
		panic(err)
	}
	defer c.CloseNow()
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create","model":"tether-scripted","store":false,"input":"Hello over WSS"}`))
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			panic(err)
		}
		var ev struct{ Type string }
		json.Unmarshal(b, &ev)
		if ev.Type == "response.completed" || ev.Type == "error" {
			fmt.Println(ev.Type)
			break
		}
	}
	// Output: response.completed
}
