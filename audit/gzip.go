package audit

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/egressd/egressd/internal/safefile"
)

// gzipMagic begins every gzip file; an audit line begins with "{".
var gzipMagic = []byte{0x1f, 0x8b}

// maxInflation bounds what a compressed file may inflate to, as a multiple
// of its size on disk (plus gzipFloor). Every audit line holds two hashes,
// 128 hex digits no compressor can shrink below 64 bytes, so an egressd
// log compresses a few times at most; a file that inflates sixty-four
// times past its size is not one, and without the bound a few kilobytes
// of zeros would keep verify busy for ever.
const (
	maxInflation = 64
	gzipFloor    = 1 << 20
)

// openLog opens an audit file for reading: a regular file, not followed
// into a FIFO or a device (safefile.OpenRegular), read through gzip when
// it begins with gzip's magic (logrotate's compress leaves audit.log.1.gz),
// whatever its name. A compressed file's errors name it.
func openLog(name string) (io.ReadCloser, error) {
	f, err := safefile.OpenRegular(name)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReader(f)
	if magic, _ := br.Peek(len(gzipMagic)); !bytes.Equal(magic, gzipMagic) {
		return logReader{br, f}, nil
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: begins as gzip but is not a gzip file egressd can read: %w", name, err)
	}
	limit := st.Size()*maxInflation + gzipFloor
	return logReader{&inflated{name: name, r: zr, left: limit, limit: limit, size: st.Size()}, f}, nil
}

// logReader is a reader over an open file, closed with it.
type logReader struct {
	io.Reader
	f *os.File
}

func (l logReader) Close() error { return l.f.Close() }

// inflated reads a gzip stream, at most limit bytes of it.
type inflated struct {
	name        string
	r           io.Reader
	left, limit int64
	size        int64
}

func (z *inflated) Read(p []byte) (int, error) {
	if z.left <= 0 {
		return 0, fmt.Errorf("%s: decompresses to more than %d bytes, %d times its %d bytes: not a compressed audit log (one compresses a few times at most); if it is one, gunzip it and give the file", z.name, z.limit, maxInflation, z.size)
	}
	if int64(len(p)) > z.left {
		p = p[:z.left]
	}
	n, err := z.r.Read(p)
	z.left -= int64(n)
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("%s: reading its gzip stream: %w (%w)", z.name, ErrDamagedStream, err)
	}
	return n, err
}

// ErrDamagedStream is a compressed rotation that does not decompress to
// its end (cut back, corrupted): evidence that was changed, not a usage
// mistake, so verify calls the log broken (round 38: a cut .gz exited 2,
// which a monitor alarming on 1 would miss).
var ErrDamagedStream = errors.New("the compressed stream is damaged or cut short")
