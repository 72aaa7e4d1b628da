//go:build !amd64

package main

func int80(nr, a1, a2, a3 uint32) int32 { return -38 }

const canInt80 = false
