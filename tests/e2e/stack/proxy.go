package stack

// FaultProxy: a TCP proxy on a free loopback port in front of one upstream, for the fault
// matrix (tests/e2e/faults_test.go). It passes bytes through until told otherwise; the mode applies
// to connections already open as well as to new ones, since the clients under test keep
// their connections (HTTP keep-alive to Prometheus, HTTP/2 to the scorer, a watch to the
// API server):
//
//   - pass: bytes both ways, as they come;
//   - delay(d): every chunk a client sends waits d before it is forwarded (a slow server);
//   - garbage(b): the next chunk a client sends is answered with b and the connection is
//     closed, the upstream never sees it (a server answering nonsense);
//   - blackHole: nothing is forwarded either way, connections are accepted and held, nothing
//     answered and nothing reset (a partition). Bytes already read wait in the proxy and go
//     through, in order, once the mode changes back: a healed network delivers what the
//     kernel retransmits;
//   - reset: the next chunk either side sends resets both connections (RST).
//
// CutAll resets every connection open now (a dropped watch); StrandAll black-holes every
// connection open now, for good, while new ones pass (a watch silently lost: a conntrack or
// NAT entry gone, a peer vanished without a reset). New connections are accepted as before.

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type proxyMode int

const (
	proxyPass proxyMode = iota
	proxyDelay
	proxyGarbage
	proxyBlackHole
	proxyReset
)

// FaultProxy is the proxy (see the file comment); its zero value is not usable, StartProxy
// makes one.
type FaultProxy struct {
	ln       net.Listener
	upstream string

	mu      sync.Mutex
	mode    proxyMode
	delay   time.Duration
	garbage []byte
	changed chan struct{} // closed and replaced at every mode change
	conns   map[*proxyPair]struct{}

	accepted atomic.Int64
	closed   chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
}

type proxyPair struct {
	client, upstream net.Conn
	stranded         atomic.Bool
}

// StartProxy listens on a free 127.0.0.1 port and forwards to upstream (host:port); closed
// at cleanup.
func StartProxy(t testing.TB, upstream string) *FaultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &FaultProxy{ln: ln, upstream: upstream, changed: make(chan struct{}), conns: map[*proxyPair]struct{}{}, closed: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *FaultProxy) Addr() string { return p.ln.Addr().String() }

// Accepted counts the connections accepted so far.
func (p *FaultProxy) Accepted() int64 { return p.accepted.Load() }

func (p *FaultProxy) set(mode proxyMode, delay time.Duration, garbage []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.delay, p.garbage = mode, delay, garbage
	close(p.changed)
	p.changed = make(chan struct{})
}

// Pass, Delay, Garbage, BlackHole and ResetConnections switch the mode (see the file
// comment) for open and new connections.
func (p *FaultProxy) Pass()                 { p.set(proxyPass, 0, nil) }
func (p *FaultProxy) Delay(d time.Duration) { p.set(proxyDelay, d, nil) }
func (p *FaultProxy) Garbage(answer []byte) { p.set(proxyGarbage, 0, answer) }
func (p *FaultProxy) BlackHole()            { p.set(proxyBlackHole, 0, nil) }
func (p *FaultProxy) ResetConnections()     { p.set(proxyReset, 0, nil) }
func (p *FaultProxy) state() (proxyMode, time.Duration, []byte, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay, p.garbage, p.changed
}

// CutAll resets every open connection; returns how many pairs it cut.
func (p *FaultProxy) CutAll() int {
	p.mu.Lock()
	pairs := make([]*proxyPair, 0, len(p.conns))
	for c := range p.conns {
		pairs = append(pairs, c)
	}
	p.mu.Unlock()
	for _, c := range pairs {
		c.reset()
	}
	return len(pairs)
}

// StrandAll black-holes every open connection until the proxy closes; returns how many.
func (p *FaultProxy) StrandAll() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.stranded.Store(true)
	}
	return len(p.conns)
}

// Close stops accepting, resets every connection and waits for the proxy's goroutines.
func (p *FaultProxy) Close() {
	p.once.Do(func() {
		close(p.closed)
		_ = p.ln.Close()
		p.CutAll()
		p.wg.Wait()
	})
}

func (c *proxyPair) reset() {
	for _, conn := range []net.Conn{c.client, c.upstream} {
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // close sends RST, not FIN
		}
		_ = conn.Close()
	}
}

func (p *FaultProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		up, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
		if err != nil {
			// The upstream is down: the client sees its connection closed, as it would see
			// a refused one behind a load balancer.
			_ = client.Close()
			continue
		}
		pair := &proxyPair{client: client, upstream: up}
		p.mu.Lock()
		p.conns[pair] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		var done sync.WaitGroup
		done.Add(2)
		go func() { defer p.wg.Done(); defer done.Done(); p.pump(pair, true) }()
		go func() { defer p.wg.Done(); defer done.Done(); p.pump(pair, false) }()
		go func() {
			done.Wait()
			p.mu.Lock()
			delete(p.conns, pair)
			p.mu.Unlock()
		}()
	}
}

// pump copies one direction of pair until either side closes; then closes both.
func (p *FaultProxy) pump(pair *proxyPair, fromClient bool) {
	src, dst := pair.upstream, pair.client
	if fromClient {
		src, dst = pair.client, pair.upstream
	}
	defer func() {
		_ = pair.client.Close()
		_ = pair.upstream.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate(pair, fromClient) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// gate decides what happens to a chunk read from one side: forward it (true), or end the
// connection (false). Blocks while the proxy black-holes.
func (p *FaultProxy) gate(pair *proxyPair, fromClient bool) bool {
	if pair.stranded.Load() {
		<-p.closed
		return false
	}
	for {
		mode, delay, garbage, changed := p.state()
		switch mode {
		case proxyPass:
			return true
		case proxyDelay:
			if fromClient {
				select {
				case <-time.After(delay):
				case <-p.closed:
					return false
				}
			}
			return true
		case proxyGarbage:
			if !fromClient {
				return true // an answer to a request sent before the switch
			}
			_, _ = pair.client.Write(garbage)
			return false
		case proxyBlackHole:
			select {
			case <-changed:
			case <-p.closed:
				return false
			}
		case proxyReset:
			pair.reset()
			return false
		}
	}
}
