package main

// A streamed chat completion (request "stream": true), as the runtime streams
// it: a 200 text/event-stream whose events are the runtime's normalized
// ones, "event: <type>\ndata: <json>\n\n" with type start, delta, end or
// error, mapped from the provider's Responses API events. A provider failure
// is an error event, not an error status; each wait for the provider's next
// event is bounded by the stream idle timeout.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
)

// Maximum size of one provider event line.
const providerEventLineLimit = 1 << 20

type streamStart struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

type streamDelta struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Content string `json:"content"`
}

type streamEnd struct {
	Type         string     `json:"type"`
	ID           string     `json:"id"`
	FinishReason string     `json:"finish_reason"`
	Usage        tokenUsage `json:"usage"`
}

type streamError struct {
	Type    string  `json:"type"`
	ID      *string `json:"id"`
	Code    string  `json:"code"`
	Message string  `json:"message"`
}

// providerEvent is one Responses API stream event, as far as the runtime reads it.
type providerEvent struct {
	Type     string           `json:"type"`
	Delta    string           `json:"delta"`
	Response providerResponse `json:"response"`
}

// sseWriter writes the runtime's events and flushes each at once.
type sseWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
}

func (s sseWriter) send(kind string, event any) {
	data, _ := json.Marshal(event)
	_, _ = io.WriteString(s.w, "event: "+kind+"\ndata: "+string(data)+"\n\n")
	if s.flusher != nil {
		s.flusher.Flush()
	}
}

func (s sseWriter) fail(id string, code, message string) {
	event := streamError{Type: "error", Code: code, Message: message}
	if id != "" {
		event.ID = &id
	}
	s.send("error", event)
}

func streamChat(w http.ResponseWriter, r *http.Request, p *providerClient, request chatRequest, idle time.Duration) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	out := sseWriter{w, flusher}
	if flusher != nil {
		flusher.Flush()
	}
	body, err := responsesBody(request, true)
	if err != nil {
		// The runtime's generator raises after the response started: the connection is cut.
		logf("chat stream: %v", err)
		panic(http.ErrAbortHandler)
	}

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	events := make(chan providerEvent)
	failed := make(chan error, 1)
	go readProviderEvents(ctx, p, body, events, failed)

	id := ""
	for {
		timer := time.NewTimer(idle)
		var event providerEvent
		select {
		case event = <-events:
			timer.Stop()
		case err := <-failed:
			timer.Stop()
			var failure *apiError
			switch {
			case err == nil || r.Context().Err() != nil: // the stream ended, or the client left
			case errors.As(err, &failure):
				_, code, message := p.failure(failure)
				out.fail(id, code, message)
			case errors.Is(err, errSSEError):
				out.fail(id, p.name+"_api_error", "An unexpected "+p.display+" API error occurred.")
			default: // the provider's stream broke: an unhandled exception, the connection is cut
				logf("chat stream: %v", err)
				panic(http.ErrAbortHandler)
			}
			return
		case <-timer.C:
			out.fail(id, "provider_stream_timeout", "The provider stream timed out.")
			return
		}
		if done := relay(out, p, event, &id); done {
			return
		}
	}
}

// relay maps one provider event to the runtime's events; true when the stream is over.
func relay(out sseWriter, p *providerClient, event providerEvent, id *string) bool {
	response := event.Response
	start := func() {
		*id = response.ID
		out.send("start", streamStart{"start", response.ID, p.name, response.Model})
	}
	switch event.Type {
	case "response.created":
		start()
	case "response.output_text.delta":
		if *id == "" {
			out.fail("", p.name+"_invalid_stream_order",
				p.display+" emitted a text delta before the response start event.")
			return true
		}
		if event.Delta != "" {
			out.send("delta", streamDelta{"delta", *id, event.Delta})
		}
	case "response.completed", "response.incomplete":
		if *id == "" {
			start()
		}
		usage, ok := response.usage()
		if !ok {
			code := p.name + "_usage_unavailable"
			if event.Type == "response.incomplete" {
				code = p.name + "_response_incomplete"
			}
			out.fail(*id, code, p.display+" response did not include token usage")
			return true
		}
		out.send("end", streamEnd{"end", *id, response.finishReason(), usage})
		return true
	case "response.failed":
		code, message := p.name+"_response_failed", p.display+" response failed"
		if failure := response.Error; failure != nil {
			message = failure.Message
			if failure.Code != nil {
				code = *failure.Code
			}
		}
		if *id == "" {
			*id = response.ID
		}
		out.fail(*id, code, message)
		return true
	}
	return false
}

// errSSEError is an "error" event from the provider, which the SDK raises as an APIError.
var errSSEError = errors.New("the provider sent an error event")

// readProviderEvents sends the streamed request and passes on each event's
// data; it reports how the stream ended on failed (nil: the provider closed it).
func readProviderEvents(ctx context.Context, p *providerClient, body []byte, events chan<- providerEvent, failed chan<- error) {
	response, err := p.do(ctx, http.MethodPost, "/responses", body)
	if err != nil {
		failed <- err
		return
	}
	defer response.Body.Close()
	lines := bufio.NewScanner(response.Body)
	lines.Buffer(make([]byte, 0, 64<<10), providerEventLineLimit)
	var kind string
	var data bytes.Buffer
	for lines.Scan() {
		line := lines.Text()
		switch {
		case strings.HasPrefix(line, "event:"):
			kind = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		case line == "" && data.Len() > 0:
			if kind == "error" {
				failed <- errSSEError
				return
			}
			if strings.HasPrefix(data.String(), "[DONE]") {
				failed <- nil
				return
			}
			var event providerEvent
			if json.Unmarshal(data.Bytes(), &event) == nil {
				select {
				case events <- event:
				case <-ctx.Done():
					return
				}
			}
			kind = ""
			data.Reset()
		}
	}
	failed <- lines.Err()
}
