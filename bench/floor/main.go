// Command floor is the benchmark's library floor: a goproxy CONNECT proxy
// that accepts every CONNECT with goproxy's defaults. egressd's row beside
// it shows what egressd's checks cost. BENCH_HOST=name=ip stands in for the
// DNS answer egressd gets from the benchmark's resolver.
package main

import (
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/elazarl/goproxy"
)

func main() {
	p := goproxy.NewProxyHttpServer()
	p.Logger = log.New(io.Discard, "", 0)
	name, ip, _ := strings.Cut(os.Getenv("BENCH_HOST"), "=")
	p.ConnectDial = func(network, addr string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(addr); err == nil && host == name {
			addr = net.JoinHostPort(ip, port)
		}
		return net.Dial(network, addr)
	}
	log.Fatal(http.ListenAndServe(os.Args[1], p))
}
