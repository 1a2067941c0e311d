package websearch_test

import (
	"context"
	"fmt"
	"log"

	"github.com/tether-run/tether/hostedtools/websearch"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

func ExampleIndex() {
	ix, err := websearch.NewIndex([]websearch.Document{
		{URL: "https://example.com/tea", Title: "Making tea", Body: "Boil water. Steep the leaves for three minutes."},
		{URL: "https://example.com/coffee", Title: "Making coffee", Body: "Grind the beans. Pour hot water over them."},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer ix.Close()

	sources, err := ix.Search(context.Background(), "how long to steep tea", 5)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sources[0].URL)
	fmt.Println(sources[0].Snippet)
	// Output:
	// https://example.com/tea
	// Boil water. Steep the leaves for three minutes.
}

func ExampleTool() {
	docs, err := websearch.DefaultCorpus() // the Go standard library documentation
	if err != nil {
		log.Fatal(err)
	}
	ix, err := websearch.NewIndex(docs)
	if err != nil {
		log.Fatal(err)
	}
	defer ix.Close()

	var tool runtime.Tool = websearch.New(ix) // as a tether server calls it
	call := protocol.Call{Type: protocol.ItemFunctionCall, ID: "ws_1", CallID: "call_1", Name: "web_search", Input: `{"query":"parse a URL query string"}`}
	item, err := tool.Call(context.Background(), call, func(e protocol.Event) {
		fmt.Println(protocol.Header(e).Type)
	})
	if err != nil {
		log.Fatal(err)
	}
	ws := item.(*protocol.WebSearchCall)
	fmt.Println(ws.Status, ws.Action.Query, len(ws.Action.Sources))
	// Output:
	// response.web_search_call.in_progress
	// response.web_search_call.searching
	// response.web_search_call.completed
	// completed parse a URL query string 5
}
