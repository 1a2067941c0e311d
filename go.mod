module github.com/tether-run/tether

go 1.26.8

require (
	github.com/coder/websocket v1.8.15
	github.com/openai/openai-go/v3 v3.99.0
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	github.com/tiktoken-go/tokenizer v0.10.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/dlclark/regexp2/v2 v2.5.1 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	golang.org/x/text v0.42.0 // indirect
)
