package main

import "runtime/debug"

// version is stamped at build time: -ldflags "-X main.version=$(git describe)".
var version = ""

// Version returns the stamped version, else the module version, else "dev".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
