package mcp_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/tether-run/tether/internal/mcptest"
)

// TestMain checks that no test leaves a goroutine behind: a closed session
// leaves none, nor does a stdio server's command once it has ended.
//
// The test binary is also the stdio MCP server TestClientStdio starts.
func TestMain(m *testing.M) {
	mcptest.ServeStdioIfChild()
	goleak.VerifyTestMain(m)
}
