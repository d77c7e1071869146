// Command naiveext is a benchmark fixture, not a product: the "naive"
// extension of make lambda-bench, built as /opt/extensions/naive-extension.
// It reproduces the design of the EventCollector extension in the seed's
// sample (aws-samples/lambda-extension-optimization): on every INVOKE it
// uploads the event synchronously — here an HTTP POST to the harness's
// local sink (LINKGATE_BENCH_SINK_URL), which answers after 30 ms as a
// stand-in for an S3 PutObject — and only then asks for the next event, so
// the upload is paid after the function whenever it outlasts it.
//
// With LINKGATE_BENCH_SINK_URL=none it uploads nothing: the "blank"
// extension, which only registers and loops on /event/next — the floor any
// extension costs.
//
// It uses linkgate's Extensions API client, so the comparison with
// linkgate-extension isolates the design, not the protocol code.
package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/linkgate/linkgate/lambda/extension"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "naive-extension:", err)
		os.Exit(1)
	}
}

func run() error {
	sink := os.Getenv("LINKGATE_BENCH_SINK_URL")
	if sink == "" {
		return fmt.Errorf("LINKGATE_BENCH_SINK_URL is not set")
	}
	c := extension.NewClient(os.Getenv("AWS_LAMBDA_RUNTIME_API"))
	defer c.Close()
	if err := c.Register(context.Background(), filepath.Base(os.Args[0]), "INVOKE", "SHUTDOWN"); err != nil {
		return err
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for {
		ev, err := c.Next(nil)
		if err != nil {
			return err
		}
		switch ev.Type {
		case extension.EventShutdown:
			return nil
		case extension.EventInvoke:
			if sink == "none" {
				continue
			}
			resp, err := client.Post(sink, "application/json", bytes.NewReader(ev.Raw))
			if err != nil {
				fmt.Fprintln(os.Stderr, "naive-extension: upload:", err)
				continue
			}
			resp.Body.Close()
		}
	}
}
