package main

import (
	"fmt"
	"io"
)

func runServe(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "egressd serve: not built yet")
	return exitFail
}
