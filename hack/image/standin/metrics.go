package main

// GET /metrics, the runtime's request metrics under their own names, in the
// Prometheus text format (TRUSSIUM_OBSERVABILITY__METRICS_ENABLED, default
// true; without it /metrics is a 404): trussium_http_requests_active,
// trussium_http_requests_total{method,outcome,status_code} and
// trussium_http_request_duration_seconds{method,outcome}. As in the runtime,
// the probes' and the scrape's own requests are not counted. The runtime's
// process, GC and workflow series are left out.

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The runtime's request duration buckets, in seconds.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Paths the runtime's middleware does not measure (and the stand-in's own).
var unmeasured = map[string]bool{
	"/health/live": true, "/health/ready": true, "/health/components": true, "/metrics": true,
	"/standin/config": true,
}

type histogram struct {
	counts []uint64 // per bucket, not cumulative
	count  uint64
	sum    float64
}

type requestMetrics struct {
	mu        sync.Mutex
	active    int
	total     map[[3]string]uint64 // method, outcome, status_code
	durations map[[2]string]*histogram
}

func newRequestMetrics() *requestMetrics {
	return &requestMetrics{total: map[[3]string]uint64{}, durations: map[[2]string]*histogram{}}
}

// statusRecorder remembers the status a handler wrote, and still streams (Flush).
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(status int) {
	if s.status == 0 {
		s.status = status
	}
	s.ResponseWriter.WriteHeader(status)
}

func (s *statusRecorder) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

func (s *statusRecorder) Flush() {
	if flusher, ok := s.ResponseWriter.(http.Flusher); ok {
		flusher.Flush()
	}
}

// measure counts every workload request from its start to its end: completed,
// cancelled (the client left first: status 499 if none was sent) or failed
// (the handler broke off: 500 if none was sent).
func (m *requestMetrics) measure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if unmeasured[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		began := time.Now()
		m.mu.Lock()
		m.active++
		m.mu.Unlock()
		recorder := &statusRecorder{ResponseWriter: w}
		outcome := "failed"
		defer func() {
			status := recorder.status
			if outcome == "completed" && r.Context().Err() != nil {
				outcome = "cancelled"
			}
			if status == 0 {
				status = map[string]int{"completed": 200, "cancelled": 499, "failed": 500}[outcome]
			}
			m.finished(r.Method, outcome, status, time.Since(began))
		}()
		next.ServeHTTP(recorder, r)
		outcome = "completed"
	})
}

func (m *requestMetrics) finished(method, outcome string, status int, took time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.active--
	m.total[[3]string{strings.ToUpper(method), outcome, strconv.Itoa(status)}]++
	key := [2]string{strings.ToUpper(method), outcome}
	h := m.durations[key]
	if h == nil {
		h = &histogram{counts: make([]uint64, len(durationBuckets))}
		m.durations[key] = h
	}
	seconds := took.Seconds()
	for i, bound := range durationBuckets {
		if seconds <= bound {
			h.counts[i]++
			break
		}
	}
	h.count++
	h.sum += seconds
}

// number writes a float as Python's repr does ("1.0", "0.005", "+Inf").
func number(v float64) string {
	text := strconv.FormatFloat(v, 'g', -1, 64)
	if !strings.ContainsAny(text, ".eIN") {
		text += ".0"
	}
	return text
}

func (m *requestMetrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out strings.Builder
	out.WriteString("# HELP trussium_http_requests_active Number of active Trussium workload HTTP requests.\n")
	out.WriteString("# TYPE trussium_http_requests_active gauge\n")
	fmt.Fprintf(&out, "trussium_http_requests_active %s\n", number(float64(m.active)))

	out.WriteString("# HELP trussium_http_requests_total Total Trussium workload HTTP requests.\n")
	out.WriteString("# TYPE trussium_http_requests_total counter\n")
	totals := make([][3]string, 0, len(m.total))
	for key := range m.total {
		totals = append(totals, key)
	}
	sort.Slice(totals, func(i, j int) bool { return strings.Join(totals[i][:], " ") < strings.Join(totals[j][:], " ") })
	for _, key := range totals {
		fmt.Fprintf(&out, "trussium_http_requests_total{method=%q,outcome=%q,status_code=%q} %s\n",
			key[0], key[1], key[2], number(float64(m.total[key])))
	}

	out.WriteString("# HELP trussium_http_request_duration_seconds Trussium workload HTTP request duration in seconds.\n")
	out.WriteString("# TYPE trussium_http_request_duration_seconds histogram\n")
	keys := make([][2]string, 0, len(m.durations))
	for key := range m.durations {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+" "+keys[i][1] < keys[j][0]+" "+keys[j][1] })
	for _, key := range keys {
		h := m.durations[key]
		labels := fmt.Sprintf("method=%q,outcome=%q", key[0], key[1])
		var cumulative uint64
		for i, bound := range durationBuckets {
			cumulative += h.counts[i]
			fmt.Fprintf(&out, "trussium_http_request_duration_seconds_bucket{%s,le=%q} %s\n",
				labels, number(bound), number(float64(cumulative)))
		}
		fmt.Fprintf(&out, "trussium_http_request_duration_seconds_bucket{%s,le=\"+Inf\"} %s\n", labels, number(float64(h.count)))
		fmt.Fprintf(&out, "trussium_http_request_duration_seconds_count{%s} %s\n", labels, number(float64(h.count)))
		fmt.Fprintf(&out, "trussium_http_request_duration_seconds_sum{%s} %s\n", labels, number(h.sum))
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(out.String()))
}
