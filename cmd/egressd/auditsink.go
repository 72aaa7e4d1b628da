package main

import (
	"fmt"
	"io"
	"os"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/internal/safefile"
	"github.com/egressd/egressd/policy"
)

// auditSink is where the audit chain goes: a locked file (reopened on
// SIGUSR1, rolled by size) or stdout.
type auditSink struct {
	out  io.Writer
	file *audit.File
	key  []byte
	cfg  policy.AuditConfig
}

// readAuditKey reads an HMAC key file: a regular file (never a FIFO that
// would stall start-up) of at least audit.MinKeyLen bytes, the rule the
// writer and verify share.
func readAuditKey(path string) ([]byte, error) {
	key, err := safefile.ReadRegular(path, 64<<10)
	if err != nil {
		return nil, fmt.Errorf("audit key: %w", err)
	}
	if len(key) < audit.MinKeyLen {
		return nil, fmt.Errorf("audit key %s holds %d bytes: egressd refuses keys under %d bytes", path, len(key), audit.MinKeyLen)
	}
	return key, nil
}

func openAuditSink(cfg policy.AuditConfig, stdout io.Writer) (*auditSink, error) {
	s := &auditSink{out: stdout, cfg: cfg}
	if cfg.KeyFile != "" {
		key, err := readAuditKey(os.ExpandEnv(cfg.KeyFile))
		if err != nil {
			return nil, err
		}
		s.key = key
	}
	if cfg.Path == "" || cfg.Path == "-" {
		return s, nil
	}
	f, err := audit.OpenFile(cfg.Path, int64(cfg.MaxSizeMB)<<20)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	s.out, s.file = f, f
	return s, nil
}

// reopen continues the chain in a new file at the same path, after
// logrotate renamed the old one.
func (s *auditSink) reopen(log *audit.Log) error {
	if s.file == nil {
		return nil
	}
	next, err := s.file.Reopen()
	if err != nil {
		return err
	}
	old := s.file
	if err := log.Rotate(next); err != nil {
		next.Close()
		return err
	}
	s.file, s.out = next, next
	return old.Close()
}

func (s *auditSink) close() {
	if s.file != nil {
		s.file.Close()
	}
}
