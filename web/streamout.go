package web

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// streamOut is where an event stream writes.
type streamOut interface {
	// start sends the response head with the headers set so far.
	start() error
	// send writes the chunks in order and pushes them to the client. A
	// write that blocks for the stream's timeout fails with an error that
	// is os.ErrDeadlineExceeded.
	send(chunks [][]byte) error
}

// newStreamOut takes the stream's connection over from net/http when it
// can (HTTP/1.x), so that a batch of frames leaves in one writev straight
// from the fanout's bytes, with no copy, no chunked encoding and no
// flush; the response then ends when the connection closes, and cancel is
// called when the client closes it. Otherwise (HTTP/2, a recorder in
// tests) it writes through w. close releases the connection.
func newStreamOut(w http.ResponseWriter, cancel context.CancelFunc, timeout time.Duration) (out streamOut, close func()) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return &writerOut{w: w, rc: http.NewResponseController(w), timeout: timeout}, func() {}
	}
	o := &connOut{conn: conn, header: w.Header(), timeout: timeout}
	go func() {
		// The client sends nothing more on a stream: a read ends when it
		// closes the connection (or when close does).
		var b [1]byte
		conn.Read(b[:])
		cancel()
	}()
	return o, func() { conn.Close() }
}

// connOut writes to a connection taken over from net/http.
type connOut struct {
	conn    net.Conn
	header  http.Header
	timeout time.Duration
}

func (o *connOut) start() error {
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 200 OK\r\n")
	o.header.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	o.header.Set("Connection", "close")
	if err := o.header.Write(&b); err != nil {
		return err
	}
	b.WriteString("\r\n")
	return o.send([][]byte{b.Bytes()})
}

func (o *connOut) send(chunks [][]byte) error {
	_ = o.conn.SetWriteDeadline(time.Now().Add(o.timeout))
	bufs := net.Buffers(chunks)
	if _, err := bufs.WriteTo(o.conn); err != nil {
		return fmt.Errorf("%w: write: %w", errClientGone, err)
	}
	return nil
}

// writerOut writes through a ResponseWriter, gathering a batch into one
// write and flushing it.
type writerOut struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (o *writerOut) start() error { return o.send(nil) }

// writeBufs holds the buffers writerOut gathers chunks in, so a stream
// holds one only while it writes.
var writeBufs = sync.Pool{New: func() any { return new([]byte) }}

func (o *writerOut) send(chunks [][]byte) error {
	// Not every ResponseWriter supports deadlines, which is fine.
	_ = o.rc.SetWriteDeadline(time.Now().Add(o.timeout))
	bp := writeBufs.Get().(*[]byte)
	buf := (*bp)[:0]
	for _, c := range chunks {
		buf = append(buf, c...)
	}
	_, err := o.w.Write(buf)
	if cap(buf) <= 1<<20 {
		*bp = buf[:0]
		writeBufs.Put(bp)
	}
	if err == nil {
		err = o.rc.Flush()
	}
	if err != nil {
		return fmt.Errorf("%w: write: %w", errClientGone, err)
	}
	return nil
}
