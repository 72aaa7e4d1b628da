// Package audit writes, and reads back, egressd's audit log: one JSON line
// per event, hash-chained so a reviewer can prove the log is intact.
//
// It records decisions; it never makes them. Field names and reason codes
// are a stable interface documented in the README.
package audit
