package proxy

import (
	"io"
	"sync"
)

// serverRecords reads the origin's records while the handshake guard
// waits for its answer, in as few reads as the kernel allows: a read takes
// as much as the origin has sent, so the first record and whatever came
// behind it (the rest of a TLS 1.3 server flight) usually arrive in one
// read and go to the client in one write, where reading the header, then
// the body, then splicing the rest took five calls. The buffer is
// borrowed from a pool for the handshake only.
type serverRecords struct {
	src  io.Reader
	buf  *[serverRecordsSize]byte
	r, w int // buf[r:w] is read and not yet handed out
}

// serverRecordsSize holds the largest record egressd relays, header
// included.
const serverRecordsSize = tlsRecordHeaderLen + maxRecordBytes

var serverRecordBufs = sync.Pool{New: func() any { return new([serverRecordsSize]byte) }}

func newServerRecords(src io.Reader) *serverRecords {
	return &serverRecords{src: src, buf: serverRecordBufs.Get().(*[serverRecordsSize]byte)}
}

// next returns the next whole record, header included, as readRecord
// does: on an error, every byte read of it (to relay), with the error. The
// record is the buffer's until the next call or release.
func (s *serverRecords) next() ([]byte, error) {
	if s.r == s.w {
		s.r, s.w = 0, 0
	}
	if err := s.fill(tlsRecordHeaderLen); err != nil {
		return s.take(s.w - s.r), err
	}
	b := s.buf[s.r:]
	n := int(b[3])<<8 | int(b[4])
	if n > maxRecordBytes {
		return s.take(tlsRecordHeaderLen), io.ErrUnexpectedEOF
	}
	if err := s.fill(tlsRecordHeaderLen + n); err != nil {
		return s.take(s.w - s.r), err
	}
	return s.take(tlsRecordHeaderLen + n), nil
}

// fill reads until buf[r:] holds n bytes, moving what is held to the
// front first when the record would not fit behind it.
func (s *serverRecords) fill(n int) error {
	if s.r+n > len(s.buf) {
		s.w = copy(s.buf[:], s.buf[s.r:s.w])
		s.r = 0
	}
	for s.w-s.r < n {
		m, err := s.src.Read(s.buf[s.w:])
		s.w += m
		if s.w-s.r >= n {
			return nil
		}
		if err == io.EOF {
			if s.w-s.r > 0 {
				return io.ErrUnexpectedEOF // as io.ReadFull says a record cut short
			}
			return io.EOF
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *serverRecords) take(n int) []byte {
	b := s.buf[s.r : s.r+n]
	s.r += n
	return b
}

// rest returns what was read behind the records handed out, and hands it
// out too.
func (s *serverRecords) rest() []byte { return s.take(s.w - s.r) }

// release gives the buffer back; nothing it returned may be used after.
func (s *serverRecords) release() {
	serverRecordBufs.Put(s.buf)
	s.buf = nil
}
