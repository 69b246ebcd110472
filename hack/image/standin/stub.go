package main

// `trussium-standin provider`: a stub of the provider a runtime talks to, for
// tests. It serves the OpenAI-compatible endpoints Ollama serves under /v1
// and the runtime uses: GET /v1/models, GET /v1/models/<model> and
// POST /v1/responses (JSON, or server-sent events with "stream": true), whose
// answer repeats the last message ("You said: ..."). Like Ollama, it answers
// 404 to any other path and ignores the bearer key.
//
// A test steers it and reads what it saw:
//
//	POST /stub/fail?status=500   every /v1 request fails with that status (0: none)
//	GET  /stub/requests          the /v1 requests received, each key as its SHA-256
//	GET  /stub/live              200 while it runs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// How many requests the stub remembers (the oldest are forgotten first).
const stubRequestLog = 1000

// stubRequest is what the stub saw of one /v1 request.
type stubRequest struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Model  string `json:"model,omitempty"`
	Stream bool   `json:"stream,omitempty"`
	// "sha256:<hex>" of the bearer key, so a test can tell which key was sent
	// without the stub repeating it.
	KeySHA256 string `json:"keySHA256,omitempty"`
}

type providerStub struct {
	models  map[string]bool
	failing atomic.Int32
	served  atomic.Int64
	mu      sync.Mutex
	seen    []stubRequest
}

func runProviderStub(args []string) {
	flags := flag.NewFlagSet("provider", flag.ExitOnError)
	listen := flags.String("listen", "0.0.0.0:11434", "address to serve on")
	models := flags.String("models", "llama3.2", "comma-separated models the provider has")
	_ = flags.Parse(args)
	stub := &providerStub{models: map[string]bool{}}
	for _, model := range strings.Split(*models, ",") {
		if model = strings.TrimSpace(model); model != "" {
			stub.models[model] = true
		}
	}
	server := &http.Server{Addr: *listen, Handler: stub.handler(), ReadHeaderTimeout: 5 * time.Second}
	logf("provider stub serving on %s with models %s", *listen, *models)
	if err := server.ListenAndServe(); err != nil {
		logf("provider stub: %v", err)
		os.Exit(1)
	}
}

func (s *providerStub) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stub/live", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusOK, map[string]string{"status": "live"})
	})
	mux.HandleFunc("POST /stub/fail", func(w http.ResponseWriter, r *http.Request) {
		status, err := strconv.Atoi(r.URL.Query().Get("status"))
		if err != nil || (status != 0 && (status < 400 || status > 599)) {
			reply(w, http.StatusBadRequest, map[string]string{"detail": "status must be 0 or 400..599"})
			return
		}
		s.failing.Store(int32(status))
		logf("provider stub: failing with %d", status)
		reply(w, http.StatusOK, map[string]int{"failing": status})
	})
	mux.HandleFunc("GET /stub/requests", func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		reply(w, http.StatusOK, map[string]any{"requests": append([]stubRequest{}, s.seen...)})
	})
	mux.HandleFunc("GET /v1/models", s.v1(func(w http.ResponseWriter, _ *http.Request, _ *stubRequest) {
		var data []map[string]any
		for model := range s.models {
			data = append(data, modelObject(model))
		}
		reply(w, http.StatusOK, map[string]any{"object": "list", "data": data})
	}))
	mux.HandleFunc("GET /v1/models/{model...}", s.v1(func(w http.ResponseWriter, r *http.Request, seen *stubRequest) {
		seen.Model = r.PathValue("model")
		if !s.models[seen.Model] {
			providerError(w, http.StatusNotFound, fmt.Sprintf("model %q not found", seen.Model))
			return
		}
		reply(w, http.StatusOK, modelObject(seen.Model))
	}))
	mux.HandleFunc("POST /v1/responses", s.v1(s.respond))
	return mux
}

// v1 records a /v1 request and fails it while the stub is told to.
func (s *providerStub) v1(serve func(http.ResponseWriter, *http.Request, *stubRequest)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		seen := stubRequest{Method: r.Method, Path: r.URL.Path}
		if key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			sum := sha256.Sum256([]byte(key))
			seen.KeySHA256 = "sha256:" + hex.EncodeToString(sum[:])
		}
		defer func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if len(s.seen) == stubRequestLog {
				s.seen = s.seen[1:]
			}
			s.seen = append(s.seen, seen)
		}()
		if status := int(s.failing.Load()); status != 0 {
			providerError(w, status, "the stub was told to fail")
			return
		}
		serve(w, r, &seen)
	}
}

func modelObject(model string) map[string]any {
	return map[string]any{"id": model, "object": "model", "created": 0, "owned_by": "library"}
}

// providerError is the error body of Ollama's OpenAI-compatible endpoints.
func providerError(w http.ResponseWriter, status int, message string) {
	reply(w, status, map[string]any{"error": map[string]any{
		"message": message, "type": "api_error", "param": nil, "code": nil,
	}})
}

func (s *providerStub) respond(w http.ResponseWriter, r *http.Request, seen *stubRequest) {
	var request struct {
		Model  string        `json:"model"`
		Input  []chatMessage `json:"input"`
		Stream bool          `json:"stream"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, chatBodyLimit)).Decode(&request); err != nil {
		providerError(w, http.StatusBadRequest, "invalid request body")
		return
	}
	seen.Model, seen.Stream = request.Model, request.Stream
	if !s.models[request.Model] {
		providerError(w, http.StatusNotFound, fmt.Sprintf("model %q not found, try pulling it first", request.Model))
		return
	}
	said, words := "", 0
	for _, message := range request.Input {
		words += len(strings.Fields(message.Content))
		if message.Role == "user" {
			said = message.Content
		}
	}
	n := s.served.Add(1)
	id, item := fmt.Sprintf("resp_%d", n), fmt.Sprintf("msg_%d", n)
	text := "You said: " + said
	deltas := strings.SplitAfter(text, " ")
	response := func(status string) map[string]any {
		answer := map[string]any{
			"id": id, "object": "response", "created_at": time.Now().Unix(), "model": request.Model,
			"status": status, "output": []any{}, "usage": nil, "error": nil, "incomplete_details": nil,
		}
		if status == "completed" {
			answer["output"] = []any{map[string]any{
				"type": "message", "id": item, "status": "completed", "role": "assistant",
				"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}},
			}}
			answer["usage"] = map[string]int{
				"input_tokens": words, "output_tokens": len(deltas), "total_tokens": words + len(deltas),
			}
		}
		return answer
	}
	if !request.Stream {
		reply(w, http.StatusOK, response("completed"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	sequence := 0
	send := func(kind string, event map[string]any) {
		event["type"], event["sequence_number"] = kind, sequence
		sequence++
		data, _ := json.Marshal(event)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", kind, data)
		if flusher != nil {
			flusher.Flush()
		}
	}
	send("response.created", map[string]any{"response": response("in_progress")})
	for _, delta := range deltas {
		send("response.output_text.delta", map[string]any{
			"item_id": item, "output_index": 0, "content_index": 0, "delta": delta,
		})
	}
	send("response.completed", map[string]any{"response": response("completed")})
}
