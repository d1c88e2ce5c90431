// The fasthttp twins of apps/hello and apps/echo, for make bench.
// Usage: fasthttp-peer hello|echo 127.0.0.1:PORT  (GOMAXPROCS sets the cores it uses)
package main

import (
	"bytes"
	"log"
	"os"

	"github.com/valyala/fasthttp"
)

var hello = []byte("Hello World")
var noValue = []byte("no value specified")

func main() {
	if len(os.Args) != 3 {
		log.Fatal("usage: fasthttp-peer hello|echo ADDR")
	}
	mode := os.Args[1]
	handler := func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("text/plain")
		if mode == "hello" {
			ctx.SetBody(hello)
			return
		}
		if !ctx.IsGet() && !ctx.IsHead() {
			ctx.SetStatusCode(fasthttp.StatusMethodNotAllowed)
			ctx.Response.Header.Set("Allow", "GET, HEAD")
			ctx.SetBodyString("Method Not Allowed\n")
			return
		}
		vals := ctx.QueryArgs().PeekMulti("value")
		if len(vals) == 0 {
			ctx.SetBody(noValue)
			return
		}
		ctx.SetBody(bytes.Join(vals, []byte(",")))
	}
	s := &fasthttp.Server{Handler: handler, Name: "fasthttp"}
	log.Fatal(s.ListenAndServe(os.Args[2]))
}
