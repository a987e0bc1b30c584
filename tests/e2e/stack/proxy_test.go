package stack

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestFaultProxyModes checks the proxy itself against an echo server: pass, delay, garbage,
// black hole (held, then delivered in order once healed), reset, and cutAll.
func TestFaultProxyModes(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	p := StartProxy(t, echo.Addr().String())
	dial := func() net.Conn {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	roundTrip := func(c net.Conn, msg string, wait time.Duration) (string, error) {
		_ = c.SetDeadline(time.Now().Add(wait))
		if _, err := c.Write([]byte(msg)); err != nil {
			return "", err
		}
		buf := make([]byte, len(msg))
		n, err := io.ReadFull(c, buf)
		return string(buf[:n]), err
	}
	isTimeout := func(err error) bool {
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout()
	}

	c := dial()
	if got, err := roundTrip(c, "hello", 2*time.Second); err != nil || got != "hello" {
		t.Fatalf("pass: %q, %v", got, err)
	}

	p.Delay(300 * time.Millisecond)
	t0 := time.Now()
	if got, err := roundTrip(c, "slow", 5*time.Second); err != nil || got != "slow" {
		t.Fatalf("delay: %q, %v", got, err)
	}
	if d := time.Since(t0); d < 300*time.Millisecond {
		t.Errorf("delay: answered after %v, before the 300ms delay", d)
	}

	// Black hole: an open and a new connection both get nothing, and no reset...
	p.BlackHole()
	fresh := dial()
	for _, conn := range []net.Conn{c, fresh} {
		if _, err := roundTrip(conn, "held", 300*time.Millisecond); !isTimeout(err) {
			t.Fatalf("black hole: want a read timeout (no answer, no reset), got %v", err)
		}
	}
	// ...and once healed, what was held arrives, in order.
	p.Pass()
	for _, conn := range []net.Conn{c, fresh} {
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, len("held"))
		if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "held" {
			t.Fatalf("healed: %q, %v", buf, err)
		}
		if got, err := roundTrip(conn, "after", 2*time.Second); err != nil || got != "after" {
			t.Fatalf("healed: %q, %v", got, err)
		}
	}

	p.Garbage([]byte("nonsense"))
	if got, err := roundTrip(c, "whatever", 2*time.Second); got != "nonsense" {
		t.Fatalf("garbage: %q, %v", got, err)
	}
	p.Pass()

	before := p.Accepted()
	c2 := dial()
	if got, err := roundTrip(c2, "x", 2*time.Second); err != nil || got != "x" {
		t.Fatalf("pass again: %q, %v", got, err)
	}
	if p.Accepted() != before+1 {
		t.Errorf("accepted %d, want %d", p.Accepted(), before+1)
	}
	if n := p.CutAll(); n < 1 {
		t.Errorf("cutAll cut %d connections", n)
	}
	if _, err := roundTrip(c2, "y", 2*time.Second); err == nil || isTimeout(err) {
		t.Errorf("after cutAll: want a connection error, got %v", err)
	}

	// Stranded: the open connection gets nothing, for good; a new one passes.
	c4 := dial()
	if got, err := roundTrip(c4, "s", 2*time.Second); err != nil || got != "s" {
		t.Fatalf("before strandAll: %q, %v", got, err)
	}
	if n := p.StrandAll(); n < 1 {
		t.Errorf("strandAll stranded %d connections", n)
	}
	if _, err := roundTrip(c4, "lost", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("stranded: want a read timeout (no answer, no reset), got %v", err)
	}
	if got, err := roundTrip(dial(), "new", 2*time.Second); err != nil || got != "new" {
		t.Fatalf("a new connection after strandAll: %q, %v", got, err)
	}

	p.ResetConnections()
	c3 := dial()
	if _, err := roundTrip(c3, "z", 2*time.Second); err == nil || isTimeout(err) {
		t.Errorf("reset: want a connection error, got %v", err)
	}
}
