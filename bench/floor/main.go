// Command floor is the benchmark's two floors, proxies that accept every
// CONNECT and check nothing:
//
//	floor ADDR          goproxy with its defaults: the library floor, so
//	                    egressd's row beside it shows what its checks cost
//	floor -relay ADDR   the least a Go CONNECT proxy can do: read the
//	                    request head, dial, answer 200, io.Copy both ways
//	                    (splice). Its row is what this machine's kernel
//	                    allows any proxy.
//
// BENCH_HOST=name=ip stands in for the DNS answer egressd gets from the
// benchmark's resolver.
package main

import (
	"bufio"
	"flag"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/elazarl/goproxy"
)

func main() {
	relay := flag.Bool("relay", false, "a bare CONNECT relay instead of goproxy")
	flag.Parse()
	addr := flag.Arg(0)
	if *relay {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			log.Fatal(err)
		}
		for {
			c, err := ln.Accept()
			if err != nil {
				log.Fatal(err)
			}
			go serveRelay(c.(*net.TCPConn))
		}
	}
	p := goproxy.NewProxyHttpServer()
	p.Logger = log.New(io.Discard, "", 0)
	p.ConnectDial = func(network, addr string) (net.Conn, error) { return net.Dial(network, pinned(addr)) }
	log.Fatal(http.ListenAndServe(addr, p))
}

func pinned(addr string) string {
	name, ip, _ := strings.Cut(os.Getenv("BENCH_HOST"), "=")
	if host, port, err := net.SplitHostPort(addr); err == nil && host == name {
		return net.JoinHostPort(ip, port)
	}
	return addr
}

// serveRelay reads one CONNECT head, dials, answers 200, passes on any
// bytes the client sent behind the head, and splices.
func serveRelay(c *net.TCPConn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		return
	}
	up, err := net.Dial("tcp", pinned(req.RequestURI))
	if err != nil {
		return
	}
	defer up.Close()
	if _, err := c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	if n := br.Buffered(); n > 0 {
		pending, _ := br.Peek(n)
		if _, err := up.Write(pending); err != nil {
			return
		}
	}
	done := make(chan struct{})
	go func() {
		io.Copy(c, up)
		c.CloseWrite()
		close(done)
	}()
	io.Copy(up, c)
	up.(*net.TCPConn).CloseWrite()
	<-done
}
