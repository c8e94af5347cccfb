package wheels

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// link is one file a simple index page lists.
type link struct {
	File string
	URL  *url.URL
}

var anchorRE = regexp.MustCompile(`(?is)<a\s[^>]*?href\s*=\s*(?:"([^"]*)"|'([^']*)')[^>]*>`)

// parseIndexPage reads the anchors of a PEP 503 project page, resolving relative hrefs against
// base. The file name is the last segment of the link's path; a "#sha256=..." fragment is
// dropped (only the hash the host computes is trusted).
func parseIndexPage(page []byte, base *url.URL) []link {
	var links []link
	for _, m := range anchorRE.FindAllSubmatch(page, -1) {
		href := html.UnescapeString(string(m[1]) + string(m[2]))
		u, err := base.Parse(href)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			continue
		}
		u.Fragment = ""
		file, err := url.PathUnescape(path.Base(u.EscapedPath()))
		if err != nil || file == "" || file == "/" || file == "." {
			continue
		}
		links = append(links, link{File: file, URL: u})
	}
	return links
}

// fetcher makes the install's requests and records each as an egress attempt of the install
// phase.
type fetcher struct {
	client   *http.Client
	header   func(u *url.URL) (http.Header, []string)
	attempts []guard.EgressAttempt
}

// get fetches u, reading at most max bytes of its body. A 404 or 410 gives a nil body and no
// error; an answer that is no answer (a connection failure, a 5xx, a body over max) is an
// error, typed by the caller.
func (f *fetcher) get(ctx context.Context, u *url.URL, max int64) ([]byte, int, error) {
	att := guard.EgressAttempt{Time: time.Now().UTC(), Kind: "http", Host: u.Hostname(), Port: port(u), Allowed: true, Phase: guard.EgressPhaseInstall}
	defer func() { f.attempts = append(f.attempts, att) }()
	trace := &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
		if a, ok := ci.Conn.RemoteAddr().(*net.TCPAddr); ok {
			att.IP = a.IP.String()
		}
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet, u.String(), nil)
	if err != nil {
		att.Reason = err.Error()
		return nil, 0, err
	}
	if f.header != nil {
		h, names := f.header(u)
		for k, vs := range h {
			req.Header[k] = vs
		}
		att.Secrets = names
	}
	resp, err := f.client.Do(req)
	if err != nil {
		att.Reason = err.Error()
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	att.BytesIn = int64(len(body))
	switch {
	case err != nil:
		att.Reason = err.Error()
		return nil, resp.StatusCode, err
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		att.Reason = resp.Status
		return nil, resp.StatusCode, nil
	case resp.StatusCode != http.StatusOK:
		att.Reason = resp.Status
		return nil, resp.StatusCode, errors.New(resp.Status)
	case int64(len(body)) > max:
		att.Reason = fmt.Sprintf("over %d bytes", max)
		return nil, resp.StatusCode, fmt.Errorf("%s is over %d bytes", u.Redacted(), max)
	}
	return body, resp.StatusCode, nil
}

func port(u *url.URL) uint16 {
	if p, err := strconv.ParseUint(u.Port(), 10, 16); err == nil {
		return uint16(p)
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

// sdistOf says whether file is a source distribution of name at version.
func sdistOf(file, name, version string) bool {
	if !isSdist(file) {
		return false
	}
	base := file
	for _, ext := range []string{".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".tar", ".zip"} {
		if b, ok := strings.CutSuffix(strings.ToLower(base), ext); ok {
			base = base[:len(b)]
			break
		}
	}
	i := strings.LastIndex(base, "-")
	return i > 0 && guard.NormalizePackageName(base[:i]) == name && sameVersion(base[i+1:], version)
}
