package main

// POST /v1/chat/completions as the runtime serves it: a normalized request,
// sent to the provider's Responses API (POST <baseURL>/responses), and its
// answer mapped back, as one JSON document or as server-sent events.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

const (
	// The runtime's TimeoutSettings defaults.
	defaultProviderRequestSeconds = 60
	defaultStreamIdleSeconds      = 30
	// A bound on what the stand-in reads (the runtime has none of its own).
	chatBodyLimit     = 1 << 20
	responseBodyLimit = 8 << 20
)

// chatMessage is a normalized message: the runtime's ChatMessage.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chatRequest is the runtime's ChatCompletionRequest (unknown fields refused).
type chatRequest struct {
	Model           string        `json:"model"`
	Messages        []chatMessage `json:"messages"`
	Temperature     *float64      `json:"temperature"`
	MaxOutputTokens *int          `json:"max_output_tokens"`
	Stream          bool          `json:"stream"`
}

// validationError is one entry of a 422's detail list, shaped as FastAPI's.
type validationError struct {
	Type string `json:"type"`
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
}

func parseChatRequest(body []byte) (chatRequest, []validationError) {
	var request chatRequest
	decoder := json.NewDecoder(bytes.NewReader(body))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&request); err != nil {
		return request, []validationError{{"json_invalid", []any{"body"}, err.Error()}}
	}
	var problems []validationError
	add := func(kind, message string, loc ...any) {
		problems = append(problems, validationError{kind, append([]any{"body"}, loc...), message})
	}
	request.Model = strings.TrimSpace(request.Model)
	if request.Model == "" {
		add("string_too_short", "String should have at least 1 character", "model")
	}
	if len(request.Messages) == 0 {
		add("too_short", "List should have at least 1 item after validation, not 0", "messages")
	}
	for i := range request.Messages {
		message := &request.Messages[i]
		switch message.Role {
		case "system", "user", "assistant", "tool":
		default:
			add("enum", "Input should be 'system', 'user', 'assistant' or 'tool'", "messages", i, "role")
		}
		message.Content = strings.TrimSpace(message.Content)
		if message.Content == "" {
			add("string_too_short", "String should have at least 1 character", "messages", i, "content")
		}
	}
	if t := request.Temperature; t != nil && (*t < 0 || *t > 2) {
		add("less_than_equal", "Input should be between 0 and 2", "temperature")
	}
	if n := request.MaxOutputTokens; n != nil && *n <= 0 {
		add("greater_than", "Input should be greater than 0", "max_output_tokens")
	}
	return request, problems
}

// responsesRequest is the body the runtime's adapter has the SDK send.
type responsesRequest struct {
	Model           string        `json:"model"`
	Input           []chatMessage `json:"input"`
	MaxOutputTokens *int          `json:"max_output_tokens"`
	Temperature     *float64      `json:"temperature"`
	Store           bool          `json:"store"`
	Stream          bool          `json:"stream"`
}

// providerResponse is the part of a Responses API object the runtime reads.
type providerResponse struct {
	ID     string `json:"id"`
	Model  string `json:"model"`
	Status string `json:"status"`
	Output []struct {
		Type    string `json:"type"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
	Usage *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *struct {
		Code    *string `json:"code"`
		Message string  `json:"message"`
	} `json:"error"`
}

// outputText is the SDK's Response.output_text: every output_text part of every message.
func (r providerResponse) outputText() string {
	var text strings.Builder
	for _, item := range r.Output {
		if item.Type != "message" {
			continue
		}
		for _, part := range item.Content {
			if part.Type == "output_text" {
				text.WriteString(part.Text)
			}
		}
	}
	return text.String()
}

func (r providerResponse) finishReason() string {
	switch {
	case r.Status == "completed":
		return "stop"
	case r.Status == "incomplete" && r.IncompleteDetails != nil && r.IncompleteDetails.Reason == "max_output_tokens":
		return "length"
	case r.Status == "incomplete" && r.IncompleteDetails != nil && r.IncompleteDetails.Reason == "content_filter":
		return "content_filter"
	default:
		return "error"
	}
}

// tokenUsage is the runtime's TokenUsage; its total must add up.
type tokenUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

func (r providerResponse) usage() (tokenUsage, bool) {
	if r.Usage == nil || r.Usage.InputTokens < 0 || r.Usage.OutputTokens < 0 ||
		r.Usage.TotalTokens != r.Usage.InputTokens+r.Usage.OutputTokens {
		return tokenUsage{}, false
	}
	return tokenUsage(*r.Usage), true
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	FinishReason string      `json:"finish_reason"`
}

type chatResponse struct {
	ID       string       `json:"id"`
	Provider string       `json:"provider"`
	Model    string       `json:"model"`
	Choices  []chatChoice `json:"choices"`
	Usage    tokenUsage   `json:"usage"`
}

// internalError is what the runtime answers for an exception it does not
// handle (Starlette's plain-text 500).
func internalError(w http.ResponseWriter, why string) {
	logf("chat: %s", why)
	http.Error(w, "Internal Server Error", http.StatusInternalServerError)
}

func chatHandler(c Config, provider *providerClient) http.Handler {
	requestTimeout := orDefault(c.ProviderRequestTimeoutSeconds, defaultProviderRequestSeconds)
	idleTimeout := orDefault(c.StreamIdleTimeoutSeconds, defaultStreamIdleSeconds)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, chatBodyLimit))
		if err != nil {
			reply(w, http.StatusRequestEntityTooLarge, map[string]string{"detail": "Request body too large"})
			return
		}
		request, problems := parseChatRequest(body)
		if len(problems) > 0 {
			reply(w, http.StatusUnprocessableEntity, map[string]any{"detail": problems})
			return
		}
		if !provider.configured() {
			reply(w, http.StatusServiceUnavailable, map[string]any{"detail": map[string]string{
				"code": "chat_capability_unavailable", "message": "No chat provider is configured.",
			}})
			return
		}
		if request.Stream {
			streamChat(w, r, provider, request, idleTimeout)
			return
		}
		completeChat(w, r, provider, request, requestTimeout)
	})
}

// orDefault is a configured number of seconds, or the runtime's default.
func orDefault(configured, fallback int) time.Duration {
	if configured == 0 {
		configured = fallback
	}
	return time.Duration(configured) * time.Second
}

// responsesBody is the provider request for a chat request; a tool message is
// the adapter's own error (an unhandled exception in the runtime).
func responsesBody(request chatRequest, stream bool) ([]byte, error) {
	for _, message := range request.Messages {
		if message.Role == "tool" {
			return nil, errors.New("tool messages are not supported")
		}
	}
	return json.Marshal(responsesRequest{
		Model: request.Model, Input: request.Messages, MaxOutputTokens: request.MaxOutputTokens,
		Temperature: request.Temperature, Store: false, Stream: stream,
	})
}

func completeChat(w http.ResponseWriter, r *http.Request, p *providerClient, request chatRequest, timeout time.Duration) {
	body, err := responsesBody(request, false)
	if err != nil {
		internalError(w, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	response, err := p.do(ctx, http.MethodPost, "/responses", body)
	var answer providerResponse
	if err == nil {
		err = json.NewDecoder(io.LimitReader(response.Body, responseBodyLimit)).Decode(&answer)
		response.Body.Close()
		if err != nil && ctx.Err() == nil {
			// The SDK cannot parse the answer: an APIError of no known kind.
			replyDetail(w, http.StatusBadGateway, p.name+"_api_error",
				"An unexpected "+p.display+" API error occurred.")
			return
		}
	}
	var failure *apiError
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		replyDetail(w, http.StatusGatewayTimeout, "provider_request_timeout", "The provider request timed out.")
		return
	case errors.As(err, &failure):
		status, code, message := p.failure(failure)
		replyDetail(w, status, code, message)
		return
	case err != nil: // the client went away
		return
	}
	if answer.Status != "completed" && answer.Status != "incomplete" {
		internalError(w, fmt.Sprintf("the provider's response is %q", answer.Status))
		return
	}
	text := answer.outputText()
	usage, ok := answer.usage()
	if text == "" || !ok {
		internalError(w, "the provider's response has no text or no consistent usage")
		return
	}
	reply(w, http.StatusOK, chatResponse{
		ID: answer.ID, Provider: p.name, Model: answer.Model,
		Choices: []chatChoice{{0, chatMessage{"assistant", text}, answer.finishReason()}},
		Usage:   usage,
	})
}

func replyDetail(w http.ResponseWriter, status int, code, message string) {
	reply(w, status, map[string]any{"detail": map[string]string{"code": code, "message": message}})
}
