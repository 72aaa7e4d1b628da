package proxy

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/egressd/egressd/policy"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// maxStalledBrokeredConnBytes bounds what one brokered HTTP/2 connection
// holds in egressd when its program asks for maxStreams large answers and
// stops reading them (measured: see README "Limits and timeouts").
const maxStalledBrokeredConnBytes = 5 << 19 // 2.5 MiB

// stalledStreams is the streams a brokered HTTP/2 connection serves at once
// (broker.maxStreams).
const stalledStreams = 8

// stalledConns is how many such connections the test holds: a quarter of
// the default limits.max_brokered_connections, so the reading is per
// connection over several, and the test stays fast.
const stalledConns = 8

// TestBrokeredConnectionsThatAskForBigAnswersAndNeverReadThemHoldUnderTheDocumentedWorstCase:
// round 33 opened the default cap of brokered HTTP/2 connections, 8
// `GET /big` streams each, with a huge window, and never read: egressd
// held about 3 MB per connection (the response scrubber's buffers per
// answer in flight), where the README said about 1 MiB at worst. Here
// real HTTP/2 clients (a framer speaking on a real TLS connection through
// the CONNECT) do the same to a real TLS origin whose answers never end,
// after a Basic credential made egressd build a token (so each answer
// goes through both scrubber layers); once every stream has passed
// stalledMark bytes through egressd, the client stops reading and the
// heap and stacks in use after a collection, per connection, are held to
// maxStalledBrokeredConnBytes. The reading includes the test's own origin
// and clients, so it overstates egressd's share.
func TestBrokeredConnectionsThatAskForBigAnswersAndNeverReadThemHoldUnderTheDocumentedWorstCase(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector grows frames and moves values to the heap: the bound is for the build that ships")
	}
	profile := os.Getenv("EGRESSD_HEAP_PROFILE")
	if profile != "" {
		runtime.MemProfileRate = 1
	}
	b := newBrokerEnv(t, true, endlessBigAnswer, withConfig(func(c *policy.Config) {
		c.Limits.MaxBrokeredConnections = 2 * stalledConns
	}))
	// A Basic credential: egressd builds a token, and every later answer
	// is scrubbed of it too (the second scrubber layer).
	if resp, body := do(t, b.client(true), b.credentialRequest(t, "api.allowed.example")); resp.StatusCode != 200 {
		t.Fatalf("credential request: %d %q", resp.StatusCode, body)
	}
	before, _ := memoryInUse()
	for range stalledConns {
		b.stallBigAnswers(t)
	}
	after, _ := memoryInUse()
	per := float64(after.heap+after.stacks-before.heap-before.stacks) / stalledConns
	t.Logf("a brokered HTTP/2 connection with %d answers stalled holds %.0f KiB of heap and stacks (%.0f KiB of stacks)",
		stalledStreams, per/1024, float64(after.stacks-before.stacks)/stalledConns/1024)
	if profile != "" {
		writeHeapProfile(t, profile)
	}
	if per > maxStalledBrokeredConnBytes {
		t.Fatalf("a brokered HTTP/2 connection with %d answers stalled holds %.0f B of heap and stacks, over %d", stalledStreams, per, maxStalledBrokeredConnBytes)
	}
}

// maxStalledUploadConnBytes bounds what one brokered HTTP/2 connection
// holds when its program starts maxStreams uploads of no declared length
// to an HTTP/2 origin and never finishes them: Go's HTTP/2 transport takes
// a scratch buffer per request body as large as the origin's
// SETTINGS_MAX_FRAME_SIZE, at most 512 KiB (a Go origin's is 1 MiB), held
// until the body ends. A residual, measured (README "Limits and
// timeouts").
const maxStalledUploadConnBytes = 4 << 20

// TestBrokeredConnectionsThatStartUploadsAndNeverFinishThemHoldUnderTheDocumentedWorstCase:
// the upload side of round 33's attack. Real HTTP/2 clients start
// stalledStreams POSTs of no declared length per connection to a real
// HTTP/2 origin, send uploadMark bytes of each and stop; once the origin
// has read uploadMark bytes of every one, the heap and stacks in use after
// a collection, per connection, are held to maxStalledUploadConnBytes.
func TestBrokeredConnectionsThatStartUploadsAndNeverFinishThemHoldUnderTheDocumentedWorstCase(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector grows frames and moves values to the heap: the bound is for the build that ships")
	}
	profile := os.Getenv("EGRESSD_HEAP_PROFILE")
	if profile != "" {
		runtime.MemProfileRate = 1
	}
	arrived := make(chan struct{}, stalledConns*stalledStreams)
	b := newBrokerEnv(t, true, uploadReader(arrived), withConfig(func(c *policy.Config) {
		c.Limits.MaxBrokeredConnections = 2 * stalledConns
	}))
	before, _ := memoryInUse()
	for range stalledConns {
		b.stallUploads(t)
	}
	for range stalledConns * stalledStreams {
		<-arrived
	}
	after, _ := memoryInUse()
	per := float64(after.heap+after.stacks-before.heap-before.stacks) / stalledConns
	t.Logf("a brokered HTTP/2 connection with %d uploads stalled holds %.0f KiB of heap and stacks (%.0f KiB of stacks)",
		stalledStreams, per/1024, float64(after.stacks-before.stacks)/stalledConns/1024)
	if profile != "" {
		writeHeapProfile(t, profile)
	}
	if per > maxStalledUploadConnBytes {
		t.Fatalf("a brokered HTTP/2 connection with %d uploads stalled holds %.0f B of heap and stacks, over %d", stalledStreams, per, maxStalledUploadConnBytes)
	}
}

// uploadMark is what each stalled upload sends before it stops.
const uploadMark = 16 << 10

// uploadReader reads each request's body, reporting on arrived once
// uploadMark bytes of it came, and answers when it ends.
func uploadReader(arrived chan<- struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 4<<10)
		for n := 0; ; {
			k, err := r.Body.Read(buf)
			if n < uploadMark && n+k >= uploadMark {
				arrived <- struct{}{}
			}
			n += k
			if err != nil {
				break
			}
		}
		w.Write([]byte("ok"))
	}
}

// stallUploads opens a brokered HTTP/2 connection, starts stalledStreams
// POSTs of no declared length, sends uploadMark bytes of each and no more.
// The connection stays open until the test ends.
func (b *brokerEnv) stallUploads(t *testing.T) {
	t.Helper()
	fr, target := b.brokeredH2(t)
	data := make([]byte, uploadMark)
	for i := range uint32(stalledStreams) {
		id := 2*i + 1
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: requestBlock("POST", target, "/up"), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		if err := fr.WriteData(id, false, data); err != nil {
			t.Fatal(err)
		}
	}
}

// brokeredH2 opens a brokered HTTP/2 connection to api.allowed.example
// through the CONNECT, sends the preface and SETTINGS granting egressd a
// 2 GiB window, and returns its framer and the :authority to ask.
func (b *brokerEnv) brokeredH2(t *testing.T) (*http2.Framer, string) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.bca.CertPEM())
	target := net.JoinHostPort("api.allowed.example", itoa(b.origin.addr.Port()))
	raw, _, resp := b.rawConnect("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	raw.SetDeadline(time.Now().Add(time.Minute)) // a failsafe, not a measure
	tc := tls.Client(raw, &tls.Config{ServerName: "api.allowed.example", RootCAs: pool, NextProtos: []string{"h2"}})
	if err := tc.Handshake(); err != nil || tc.ConnectionState().NegotiatedProtocol != "h2" {
		t.Fatalf("handshake: %v, protocol %q", err, tc.ConnectionState().NegotiatedProtocol)
	}
	if _, err := tc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(tc, tc)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	fr.WriteWindowUpdate(0, 1<<31-1-65535)
	return fr, target
}

// requestBlock is the header block of a request carrying TOKEN's
// placeholder as a bearer token.
func requestBlock(method, authority, path string) []byte {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", method}, {":scheme", "https"}, {":authority", authority}, {":path", path}, {"authorization", "Bearer " + tokenPH}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return block.Bytes()
}

// stalledMark is what every stream must have received before its client
// stops reading: several of the reverse proxy's 32 KiB reads, so every
// buffer on the way has been through its growth.
const stalledMark = 256 << 10

// bigChunk is what endlessBigAnswer writes, again and again: one for
// every answer, so that the origin's share of the reading stays small.
var bigChunk = bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz012345"), 1<<10)

// endlessBigAnswer answers /big with a body that ends only when egressd
// goes away, everything else with "ok".
func endlessBigAnswer(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/big" {
		w.Write([]byte("ok"))
		return
	}
	for {
		if _, err := w.Write(bigChunk); err != nil {
			return
		}
	}
}

// stallBigAnswers opens a brokered HTTP/2 connection that grants egressd
// a 2 GiB window, asks for stalledStreams endless answers, reads until
// every one has brought stalledMark bytes, and reads no more. The
// connection stays open until the test ends.
func (b *brokerEnv) stallBigAnswers(t *testing.T) {
	t.Helper()
	fr, target := b.brokeredH2(t)
	got := map[uint32]int{}
	dec := hpack.NewDecoder(4096, nil)
	for i := range uint32(stalledStreams) {
		id := 2*i + 1
		got[id] = -1 // no HEADERS yet
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: requestBlock("GET", target, "/big"), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	for done := 0; done < stalledStreams; {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the answers: %v (received %v)", err, got)
		}
		id := f.Header().StreamID
		before := got[id]
		switch f := f.(type) {
		case *http2.HeadersFrame:
			if status := headerStatus(t, dec, f); status != "200" {
				t.Fatalf("stream %d answered %s", id, status)
			}
			got[id] = 0
		case *http2.DataFrame:
			if before < 0 {
				t.Fatalf("stream %d: DATA before HEADERS", id)
			}
			got[id] += len(f.Data())
		case *http2.RSTStreamFrame:
			t.Fatalf("stream %d reset: %v", id, f.ErrCode)
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY: %v", f.ErrCode)
		}
		if before < stalledMark && got[id] >= stalledMark {
			done++
		}
	}
}

// headerStatus is the :status of a HEADERS frame that holds its whole
// block, decoded with the connection's decoder.
func headerStatus(t *testing.T, dec *hpack.Decoder, f *http2.HeadersFrame) string {
	t.Helper()
	fields, err := dec.DecodeFull(f.HeaderBlockFragment())
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range fields {
		if h.Name == ":status" {
			return h.Value
		}
	}
	return ""
}
