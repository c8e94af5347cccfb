package notify_test

import (
	"net"
	"net/http"
	"strings"
)

// httpServer serves a webhookReceiver.
type httpServer struct{ r *webhookReceiver }

func (s *httpServer) serve(ln net.Listener) {
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r := s.r
		d := delivery{Headers: map[string]string{}, Body: readAll(req.Body)}
		for k, v := range req.Header {
			d.Headers[strings.ToLower(k)] = strings.Join(v, ",")
		}
		r.mu.Lock()
		r.deliveries = append(r.deliveries, d)
		n := len(r.deliveries)
		r.mu.Unlock()
		r.arrived <- d
		status := r.answer(n)
		if status == 0 {
			<-req.Context().Done() // hang until the sender goes away
			return
		}
		w.WriteHeader(status)
	}))
}
