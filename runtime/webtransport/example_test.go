package webtransport_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/webtransport"
)

// Listen serves a runtime.Server over WebTransport on a UDP port, with a
// self-signed certificate that a client (or a browser) pins by its hash.
// At exit the Server shuts down first, which ends the sessions in order;
// the endpoint closes after.
func ExampleListen() {
	srv, err := runtime.NewServer(runtime.Options{})
	if err != nil {
		panic(err)
	}
	cert, err := webtransport.SelfSignedCertificate(24*time.Hour, "127.0.0.1")
	if err != nil {
		panic(err)
	}
	wt, err := webtransport.Listen(srv, "127.0.0.1:0", cert)
	if err != nil {
		panic(err)
	}
	defer wt.Close()
	defer srv.Shutdown(context.Background())

	c := &clienttools.Client{BaseURL: wt.URL(), Transport: clienttools.TransportWebTransport, CertHash: wt.CertificateHash()}
	res, err := c.Run(context.Background(), clienttools.Rollout{
		Mode:    clienttools.ModeSuspend,
		Request: &protocol.CreateRequest{Model: "tether-scripted", Input: protocol.Items{protocol.UserMessage("Hello")}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(strings.HasPrefix(wt.URL(), "https://127.0.0.1:"), res.Response.Status, res.Text())
	// Output: true completed You said: "Hello"
}
