package egress

// The two ways a request leaves the proxy: CONNECT (a tunnel, or TLS interception for a host with
// secrets) and plain HTTP forwarding.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// handleConnect serves a CONNECT: the policy, then the ClientHello's SNI, then a tunnel, or, for
// a host with a secret, TLS interception.
func (p *Proxy) handleConnect(c net.Conn, br *bufio.Reader, req *http.Request) {
	host, port, err := net.SplitHostPort(req.RequestURI)
	var t target
	if err != nil {
		t, err = target{raw: printable(req.RequestURI, 255)}, fmt.Errorf("CONNECT target must be host:port")
	} else {
		t, err = parseTarget(host, port, 0)
	}
	a := p.begin("connect", t)
	dst, reason := p.decide(a, t, err)
	if reason != "" {
		writeRefusal(c, http.StatusForbidden, reason)
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		p.fail(a, "client went away")
		return
	}
	c.SetReadDeadline(time.Now().Add(p.cfg.HandshakeTimeout))
	sni, hello, err := peekClientHello(br)
	c.SetReadDeadline(time.Time{})
	if err != nil {
		p.refuseLater(a, "not a TLS ClientHello: CONNECT carries TLS only")
		c.Write(tlsAlertAccessDenied)
		return
	}
	switch {
	case t.ip.IsValid() && sni != "":
		p.refuseLater(a, "TLS SNI names a host but the CONNECT target is an IP address")
		c.Write(tlsAlertAccessDenied)
		return
	case t.name != "" && sni == "":
		p.refuseLater(a, "TLS ClientHello has no SNI")
		c.Write(tlsAlertAccessDenied)
		return
	case t.name != "":
		if n, err := guard.NormalizeEgressName(sni); err != nil || n != t.name {
			p.refuseLater(a, fmt.Sprintf("TLS SNI %q does not match the CONNECT host", printable(sni, 255)))
			c.Write(tlsAlertAccessDenied)
			return
		}
	}
	client := &prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(hello), br)}
	if rules := p.secretsFor(t, t.port); len(rules) > 0 {
		p.setTLS(a, "intercepted", rules)
		p.intercept(client, a, t, dst, rules)
		return
	}
	p.tunnel(client, a, dst)
}

// tlsAlertAccessDenied is a fatal TLS alert record (access_denied), sent to a client whose
// ClientHello was refused so its TLS library says why.
var tlsAlertAccessDenied = []byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x31}

func (p *Proxy) tunnel(client net.Conn, a *Attempt, dst netip.AddrPort) {
	up, err := p.dial(a, dst)
	if err != nil {
		return
	}
	defer p.untrack(up)
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(up, client)
		up.CloseWrite()
	}()
	io.Copy(client, up)
	client.Close()
	up.Close()
	<-done
}

// intercept terminates the client's TLS with a minted certificate, and forwards each request over
// TLS to the upstream with the secrets' headers.
func (p *Proxy) intercept(client net.Conn, a *Attempt, t target, dst netip.AddrPort, rules []SecretRule) {
	leaf, err := p.cfg.CA.leaf(t.name, time.Now())
	if err != nil {
		p.fail(a, "could not mint a certificate")
		return
	}
	tc := tls.Server(client, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.HandshakeTimeout)
	err = tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		p.fail(a, "client TLS handshake failed (does the sandbox trust the egress CA?)")
		return
	}
	defer tc.Close()
	up, err := p.dial(a, dst)
	if err != nil {
		writeRefusal(tc, http.StatusBadGateway, "upstream unreachable")
		return
	}
	defer p.untrack(up)
	utc, err := p.upstreamTLS(a, up, t.name)
	if err != nil {
		writeRefusal(tc, http.StatusBadGateway, "upstream TLS handshake failed")
		return
	}
	lr := &io.LimitedReader{R: tc}
	cbr, ubr := bufio.NewReader(lr), bufio.NewReader(utc)
	for {
		lr.N = maxHeaderBytes
		tc.SetReadDeadline(time.Now().Add(p.cfg.IdleTimeout))
		req, err := http.ReadRequest(cbr)
		if err != nil {
			return
		}
		lr.N = math.MaxInt64
		tc.SetReadDeadline(time.Time{})
		if h, err := requestHost(req.Host); err != nil || h != t.name {
			p.refuseLater(a, fmt.Sprintf("Host header %q does not match the CONNECT host", printable(req.Host, 255)))
			writeRefusal(tc, http.StatusMisdirectedRequest, "Host header does not match the CONNECT host")
			return
		}
		prepareOutgoing(req, rules)
		if !p.exchange(tc, utc, ubr, req, a, false) || req.Close {
			return
		}
	}
}

// requestHost normalizes the host of a Host header, without its port.
func requestHost(hostport string) (string, error) {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return guard.NormalizeEgressName(host)
}

// hopHeaders are dropped from forwarded requests: they belong to one hop, or to the proxy.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authorization", "Proxy-Authenticate",
	"Te", "Trailer", "Upgrade",
}

// prepareOutgoing drops hop-by-hop headers and sets the secrets' headers, replacing any the
// client sent under the same names.
func prepareOutgoing(req *http.Request, rules []SecretRule) {
	for _, f := range req.Header.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			req.Header.Del(strings.TrimSpace(name))
		}
	}
	for _, h := range hopHeaders {
		req.Header.Del(h)
	}
	for _, r := range rules {
		req.Header.Del(r.Header)
	}
	for _, r := range rules {
		req.Header.Add(r.Header, string(r.value))
	}
}

// exchange sends one request upstream and copies the response back; closing makes the response
// tell the client the connection ends. It reports whether both connections may carry another
// request.
func (p *Proxy) exchange(client io.Writer, up io.Writer, ubr *bufio.Reader, req *http.Request, a *Attempt, closing bool) bool {
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		req.Header.Del("Expect")
		if _, err := io.WriteString(client, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return false
		}
	}
	if err := req.Write(up); err != nil {
		p.fail(a, "sending the request upstream failed")
		if !errors.Is(err, errByteCap) {
			writeRefusal(client, http.StatusBadGateway, "sending the request upstream failed")
		}
		return false
	}
	for {
		resp, err := http.ReadResponse(ubr, req)
		if err != nil {
			if !errors.Is(err, errByteCap) {
				p.fail(a, "no valid response from upstream")
				writeRefusal(client, http.StatusBadGateway, "no valid response from upstream")
			}
			return false
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			if err := resp.Write(client); err != nil {
				return false
			}
			continue
		}
		resp.Close = resp.Close || closing
		err = resp.Write(client)
		resp.Body.Close()
		return err == nil && !resp.Close && resp.StatusCode != http.StatusSwitchingProtocols
	}
}

// handleHTTP forwards one absolute-form http:// request. A request to a host with a secret goes
// upstream over TLS (port 80 becomes 443; any other port keeps its number). The client
// connection is closed afterwards.
func (p *Proxy) handleHTTP(c net.Conn, req *http.Request) {
	if !req.URL.IsAbs() || req.URL.Scheme != "http" || req.URL.Host == "" {
		writeRefusal(c, http.StatusBadRequest, "send absolute http:// URLs, or CONNECT for https")
		return
	}
	t, perr := parseTarget(req.URL.Hostname(), req.URL.Port(), 80)
	rules, mode := []SecretRule(nil), ""
	if perr == nil {
		upPort := t.port
		if upPort == 80 {
			upPort = 443
		}
		if rules = p.secretsFor(t, upPort); len(rules) > 0 {
			t.port, mode = upPort, "originated"
		}
	}
	a := p.begin("http", t)
	dst, reason := p.decide(a, t, perr)
	if reason != "" {
		writeRefusal(c, http.StatusForbidden, reason)
		return
	}
	p.setTLS(a, mode, rules)
	cu, err := p.dial(a, dst)
	if err != nil {
		writeRefusal(c, http.StatusBadGateway, "upstream unreachable")
		return
	}
	defer p.untrack(cu)
	var up net.Conn = cu
	if mode == "originated" {
		tc, err := p.upstreamTLS(a, cu, t.name)
		if err != nil {
			writeRefusal(c, http.StatusBadGateway, "upstream TLS handshake failed")
			return
		}
		up = tc
	}
	req.Host = req.URL.Host
	req.Close = true
	prepareOutgoing(req, rules)
	p.exchange(c, up, bufio.NewReader(up), req, a, true)
}

// writeRefusal writes a complete error response that says why: in the status line's reason
// phrase (what urllib and curl print), in RefusedHeader and in the body.
func writeRefusal(w io.Writer, code int, reason string) {
	reason = printable(reason, 300)
	body := "sandboxflow egress: " + reason + "\n"
	fmt.Fprintf(w, "HTTP/1.1 %d %s (sandboxflow egress: %s)\r\n"+
		"Content-Type: text/plain; charset=utf-8\r\n%s: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		code, http.StatusText(code), reason, RefusedHeader, reason, len(body), body)
}
