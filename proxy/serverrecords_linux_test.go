package proxy

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
	"time"
)

// The origin's records reach the guard byte for byte however its bytes
// are cut into reads: all at once, half of what is asked each time, one
// byte at a time. A header announcing more than a record may hold is
// handed out alone with an error, and what was read behind it is kept
// for the client (the splice relayed it before).
func TestTheOriginsRecordsAreHandedOutWholeHoweverTheyAreCut(t *testing.T) {
	first, second := serverHelloRecord(), appDataRecord(5000)
	oversized := []byte{recordTypeApplicationData, 3, 3, 0xff, 0xff, 'x', 'y'}
	for name, cut := range map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"halves":   iotest.HalfReader,
		"one byte": iotest.OneByteReader,
	} {
		t.Run(name, func(t *testing.T) {
			upstream, originFar := tcpPair(t)
			sent := append(append(append([]byte{}, first...), second...), oversized...)
			if _, err := originFar.Write(sent); err != nil {
				t.Fatal(err)
			}
			waitQueued(t, upstream, len(sent))
			s := newServerRecords(cut(upstream))
			defer s.release()
			for i, want := range [][]byte{first, second} {
				got, err := s.next()
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("record %d: %d bytes, %v; want the %d bytes sent", i, len(got), err, len(want))
				}
			}
			got, err := s.next()
			if !errors.Is(err, io.ErrUnexpectedEOF) || !bytes.Equal(got, oversized[:tlsRecordHeaderLen]) {
				t.Fatalf("oversized record: %q, %v; want its header alone and ErrUnexpectedEOF", got, err)
			}
			// Whatever was read behind the header is handed out; the
			// rest is still in the socket, for the splice.
			rest := s.rest()
			upstream.SetReadDeadline(time.Now().Add(5 * time.Second))
			left := make([]byte, max(0, len(oversized)-tlsRecordHeaderLen-len(rest)))
			io.ReadFull(upstream, left)
			if all := append(rest, left...); !bytes.Equal(all, oversized[tlsRecordHeaderLen:]) {
				t.Fatalf("behind the oversized header: %q read and %q left, want %q in all", rest, left, oversized[tlsRecordHeaderLen:])
			}
		})
	}
}
