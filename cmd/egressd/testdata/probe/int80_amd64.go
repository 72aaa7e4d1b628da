package main

// int80 makes an i386 system call through the 32-bit entry point, which a
// filter that does not check the architecture lets through.
func int80(nr, a1, a2, a3 uint32) int32

const canInt80 = true
