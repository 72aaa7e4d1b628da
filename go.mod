module github.com/egressd/egressd

go 1.26.8

require (
	github.com/gobwas/glob v1.1.0
	github.com/goccy/go-yaml v1.19.2
	golang.org/x/mod v0.43.0
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.50.0
)

require golang.org/x/text v0.43.0 // indirect
