package main

// The runtime's provider client. The real runtime talks to either provider
// (openai, ollama) through the OpenAI Python SDK's AsyncOpenAI client; this is
// that client as far as the runtime's answers depend on it: the base URL and
// key it resolves, the bearer header, the SDK's retries, and the SDK errors
// the runtime turns into its own codes and statuses.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const (
	// The runtime's defaults when no base URL or key is configured (bootstrap.py),
	// and the SDK's own base URL for openai.
	ollamaDefaultBaseURL = "http://127.0.0.1:11434/v1"
	ollamaDefaultAPIKey  = "ollama"
	openaiDefaultBaseURL = "https://api.openai.com/v1"
	// The SDK's DEFAULT_MAX_RETRIES, INITIAL_RETRY_DELAY, MAX_RETRY_DELAY and connect timeout.
	maxRetries        = 2
	initialRetryDelay = 500 * time.Millisecond
	maxRetryDelay     = 8 * time.Second
	connectTimeout    = 5 * time.Second
	// How much of an error body is kept (to tell a quota error from a rate limit).
	errorBodyLimit = 64 << 10
)

// providerClient is the runtime's configured provider.
type providerClient struct {
	name    string // "openai" or "ollama", the prefix of the runtime's error codes
	display string // "OpenAI" or "Ollama", as the runtime's messages name it
	baseURL string
	apiKey  string // empty: openai without a credential, so no provider is configured
	http    *http.Client
}

func newProviderClient(c Config) *providerClient {
	p := &providerClient{
		name:    c.Provider,
		display: "OpenAI",
		baseURL: strings.TrimRight(c.BaseURL, "/"),
		apiKey:  strings.TrimSpace(c.apiKey),
		http: &http.Client{Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: connectTimeout}).DialContext,
			TLSHandshakeTimeout: connectTimeout,
			MaxIdleConnsPerHost: 100,
		}},
	}
	if c.Provider == "ollama" {
		p.display = "Ollama"
		if p.baseURL == "" {
			p.baseURL = ollamaDefaultBaseURL
		}
		if p.apiKey == "" {
			p.apiKey = ollamaDefaultAPIKey
		}
	} else if p.baseURL == "" {
		p.baseURL = openaiDefaultBaseURL
	}
	return p
}

func (p *providerClient) configured() bool { return p.apiKey != "" }

// apiError is an SDK exception: an error status, a timeout or a failed connection.
type apiError struct {
	status  int // 0 unless the provider answered with an error status
	timeout bool
	body    string
}

func (e *apiError) Error() string {
	switch {
	case e.status != 0:
		return fmt.Sprintf("HTTP status %d", e.status)
	case e.timeout:
		return "request timed out"
	default:
		return "connection failed"
	}
}

// quota is the runtime's test for a 429 that means exhausted quota rather
// than a rate limit (its provider code, or the words in the SDK's message).
func (e *apiError) quota() bool {
	body := strings.ToLower(e.body)
	return strings.Contains(body, "quota") || strings.Contains(body, "billing")
}

// failure is what the runtime answers for an SDK error: its HTTP status and
// the {"code", "message"} detail (chat.py, errors.py, the chat adapter).
func (p *providerClient) failure(e *apiError) (int, string, string) {
	switch {
	case e.timeout:
		return http.StatusGatewayTimeout, p.name + "_timeout", "The request to " + p.display + " timed out."
	case e.status == 0:
		return http.StatusBadGateway, p.name + "_connection_failed", "Trussium could not connect to " + p.display + "."
	case e.status == http.StatusBadRequest:
		return http.StatusBadRequest, p.name + "_invalid_request", p.display + " rejected the request as invalid."
	case e.status == http.StatusUnauthorized:
		return http.StatusBadGateway, p.name + "_authentication_failed",
			p.display + " authentication failed. Check the configured API key."
	case e.status == http.StatusForbidden:
		message := "The configured " + p.display + " service does not have permission to perform this request."
		if p.name == "openai" {
			message = "The configured OpenAI project does not have permission to perform this request."
		}
		return http.StatusBadGateway, p.name + "_permission_denied", message
	case e.status == http.StatusTooManyRequests && e.quota():
		message := p.display + " rejected the request because its capacity or quota was exhausted."
		if p.name == "openai" {
			message = "The configured OpenAI project has no available API quota. " +
				"Check its billing, credits, and usage limits."
		}
		return http.StatusServiceUnavailable, p.name + "_quota_exceeded", message
	case e.status == http.StatusTooManyRequests:
		return http.StatusTooManyRequests, p.name + "_rate_limit_exceeded",
			p.display + " temporarily rejected the request because a rate limit was exceeded."
	default:
		return http.StatusBadGateway, fmt.Sprintf("%s_http_%d", p.name, e.status),
			fmt.Sprintf("%s returned HTTP status %d.", p.display, e.status)
	}
}

// do sends one SDK request to baseURL+path with the bearer key, retrying as
// the SDK does: failed connections, timeouts, 408, 409, 429 and 5xx, twice,
// after 0.5 s then 1 s (less up to a quarter of jitter) or what the provider's
// Retry-After asks. A 2xx answer is returned open; any other is an *apiError,
// and the end of ctx is ctx's error.
func (p *providerClient) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		request, err := http.NewRequestWithContext(ctx, method, p.baseURL+path, bytes.NewReader(body))
		if err != nil {
			return nil, &apiError{}
		}
		request.Header.Set("Authorization", "Bearer "+p.apiKey)
		request.Header.Set("Accept", "application/json")
		if body != nil {
			request.Header.Set("Content-Type", "application/json")
		}
		response, err := p.http.Do(request)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			var netErr net.Error
			if attempt == maxRetries {
				return nil, &apiError{timeout: errors.As(err, &netErr) && netErr.Timeout()}
			}
			if !sleep(ctx, retryDelay(attempt, nil)) {
				return nil, ctx.Err()
			}
			continue
		}
		if response.StatusCode < 300 {
			return response, nil
		}
		text, _ := io.ReadAll(io.LimitReader(response.Body, errorBodyLimit))
		response.Body.Close()
		if attempt == maxRetries || !shouldRetry(response) {
			return nil, &apiError{status: response.StatusCode, body: string(text)}
		}
		if !sleep(ctx, retryDelay(attempt, response.Header)) {
			return nil, ctx.Err()
		}
	}
}

func shouldRetry(response *http.Response) bool {
	switch response.Header.Get("X-Should-Retry") {
	case "true":
		return true
	case "false":
		return false
	}
	switch code := response.StatusCode; {
	case code == http.StatusRequestTimeout, code == http.StatusConflict, code == http.StatusTooManyRequests:
		return true
	default:
		return code >= 500
	}
}

// retryDelay is the SDK's wait before retry number attempt+1.
func retryDelay(attempt int, header http.Header) time.Duration {
	if header != nil {
		if ms, err := strconv.ParseFloat(header.Get("Retry-After-Ms"), 64); err == nil && ms > 0 && ms <= 60_000 {
			return time.Duration(ms * float64(time.Millisecond))
		}
		if s, err := strconv.ParseFloat(header.Get("Retry-After"), 64); err == nil && s > 0 && s <= 60 {
			return time.Duration(s * float64(time.Second))
		}
	}
	delay := min(initialRetryDelay<<attempt, maxRetryDelay)
	return time.Duration(float64(delay) * (1 - 0.25*rand.Float64()))
}

// sleep waits d unless ctx ends first (then false).
func sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
