package ablate

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// A simulated lossy link between a client and a server on loopback, for
// the head-of-line measurement: every packet is delayed by a one-way delay,
// and a share of them is lost. Both links are the measurement's apparatus,
// the named simulated network of --hol; their waits stand for the wire.
//
// Over UDP (WebTransport) a lost datagram is dropped: QUIC notices and
// sends its data again, on its own schedule. Over TCP (WebSocket) the
// kernel's retransmission cannot be provoked from user space, so a lost
// segment is modelled: it arrives a retransmission delay late, and every
// byte behind it waits for it, as TCP delivers in order. That is the
// head-of-line blocking being measured.

// linkConfig is a simulated link's behaviour.
type linkConfig struct {
	Loss  float64       // share of packets lost, each way
	Delay time.Duration // one way
	// RTX is how late a lost TCP segment arrives: its retransmission.
	RTX  time.Duration
	Seed uint64
}

// packet is bytes due at a time.
type packet struct {
	b   []byte
	due time.Time
}

// deliver writes each packet from in at its due time, in order, until in
// closes or a write fails.
func deliver(in <-chan packet, write func([]byte) error) {
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for p := range in {
		if d := time.Until(p.due); d > 0 {
			t.Reset(d)
			<-t.C
		}
		if write(p.b) != nil {
			for range in { // drain: the reader ends on its own
			}
			return
		}
	}
}

// tcpLink forwards TCP connections to a server through the simulated link.
type tcpLink struct {
	ln     net.Listener
	target string
	cfg    linkConfig
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
	rng    *rand.Rand // guarded by mu
}

func startTCPLink(target string, cfg linkConfig) (*tcpLink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &tcpLink{ln: ln, target: target, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 1))}
	l.wg.Go(l.accept)
	return l, nil
}

func (l *tcpLink) addr() string { return l.ln.Addr().String() }

func (l *tcpLink) accept() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", l.target)
		if err != nil {
			c.Close()
			continue
		}
		l.mu.Lock()
		l.conns = append(l.conns, c, s)
		l.mu.Unlock()
		l.wg.Go(func() { l.pump(c, s) })
		l.wg.Go(func() { l.pump(s, c) })
	}
}

// mss is what one read of a pump takes at most: a segment.
const mss = 1448

// pump carries src's bytes to dst, a segment at a time, each due a delay
// later, a lost one a retransmission later still, none before the one
// ahead of it.
func (l *tcpLink) pump(src, dst net.Conn) {
	q := make(chan packet, 1<<14)
	done := make(chan struct{})
	go func() {
		defer close(done)
		deliver(q, func(b []byte) error { _, err := dst.Write(b); return err })
	}()
	var last time.Time
	for {
		buf := make([]byte, mss)
		n, err := src.Read(buf)
		if n > 0 {
			due := time.Now().Add(l.cfg.Delay)
			if l.lost() {
				due = due.Add(l.cfg.RTX)
			}
			if due.Before(last) {
				due = last // in order: nothing overtakes a late segment
			}
			last = due
			q <- packet{buf[:n], due}
		}
		if err != nil {
			close(q)
			<-done
			if tc, ok := dst.(*net.TCPConn); ok && errors.Is(err, io.EOF) {
				tc.CloseWrite()
			} else {
				dst.Close()
			}
			return
		}
	}
}

func (l *tcpLink) lost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rng.Float64() < l.cfg.Loss
}

func (l *tcpLink) close() {
	l.ln.Close()
	l.mu.Lock()
	for _, c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// udpLink forwards one client's datagrams to a server and back through the
// simulated link: each is dropped with the loss share, else delivered a
// delay later.
type udpLink struct {
	pc     net.PacketConn // the client's side
	up     *net.UDPConn   // the server's side
	cfg    linkConfig
	mu     sync.Mutex
	client net.Addr   // the one client, once it has sent; guarded by mu
	rng    *rand.Rand // guarded by mu
	wg     sync.WaitGroup
}

func startUDPLink(target string, cfg linkConfig) (*udpLink, error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ta, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		pc.Close()
		return nil, err
	}
	up, err := net.DialUDP("udp", nil, ta)
	if err != nil {
		pc.Close()
		return nil, err
	}
	l := &udpLink{pc: pc, up: up, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 2))}
	toServer, toClient := make(chan packet, 1<<14), make(chan packet, 1<<14)
	l.wg.Go(func() { deliver(toServer, func(b []byte) error { _, err := up.Write(b); return err }) })
	l.wg.Go(func() {
		deliver(toClient, func(b []byte) error {
			l.mu.Lock()
			to := l.client
			l.mu.Unlock()
			_, err := pc.WriteTo(b, to)
			return err
		})
	})
	l.wg.Go(func() {
		defer close(toServer)
		for {
			buf := make([]byte, 64<<10)
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			l.mu.Lock()
			l.client = from
			l.mu.Unlock()
			l.forward(toServer, buf[:n])
		}
	})
	l.wg.Go(func() {
		defer close(toClient)
		for {
			buf := make([]byte, 64<<10)
			n, err := up.Read(buf)
			if err != nil {
				return
			}
			l.forward(toClient, buf[:n])
		}
	})
	return l, nil
}

func (l *udpLink) addr() string { return l.pc.LocalAddr().String() }

func (l *udpLink) forward(q chan<- packet, b []byte) {
	l.mu.Lock()
	lost := l.rng.Float64() < l.cfg.Loss
	l.mu.Unlock()
	if !lost {
		q <- packet{b, time.Now().Add(l.cfg.Delay)}
	}
}

func (l *udpLink) close() {
	l.pc.Close()
	l.up.Close()
	l.wg.Wait()
}
