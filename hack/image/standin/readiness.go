package main

// GET /health/ready. Without dependency checks (the runtime's default) it is
// 200 whatever the provider does. With TRUSSIUM_READINESS__DEPENDENCY_CHECKS_ENABLED
// it asks the provider, as the runtime does: GET <baseURL>/models, or
// GET <baseURL>/models/<model> when a model is required, within the
// dependency timeout; the result, good or bad, is reused for the cache
// period, and one check runs at a time. A provider that fails answers 503.

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// dependencyHealth is the runtime's DependencyHealth: one check's bounded result.
type dependencyHealth struct {
	Name     string `json:"name"`
	Status   string `json:"status"`
	Provider string `json:"provider"`
	Model    string `json:"model,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// dependencyReadiness is the runtime's DependencyReadiness: a single-flight
// check whose result is cached for a while from the moment it was made.
type dependencyReadiness struct {
	provider *providerClient
	settings Readiness
	mu       sync.Mutex
	cached   *dependencyHealth
	cachedAt time.Time
}

func (d *dependencyReadiness) evaluate() dependencyHealth {
	d.mu.Lock()
	defer d.mu.Unlock()
	cache := time.Duration(d.settings.DependencyCacheSeconds * float64(time.Second))
	if d.cached != nil && time.Since(d.cachedAt) < cache {
		return *d.cached
	}
	timeout := time.Duration(d.settings.DependencyTimeoutSeconds * float64(time.Second))
	// Not the probe's request context: a check the prober gave up on still
	// completes and is cached, as in the runtime.
	checkCtx, cancel := context.WithTimeout(context.Background(), timeout)
	result := d.check(checkCtx)
	cancel()
	if d.cached == nil || d.cached.Status != result.Status || d.cached.Reason != result.Reason {
		logf("readiness: the provider is %s %s", result.Status, result.Reason)
	}
	d.cached, d.cachedAt = &result, time.Now()
	return result
}

// check is OpenAICompatibleProviderHealthCheck.check, bounded by ctx.
func (d *dependencyReadiness) check(ctx context.Context) dependencyHealth {
	p, model := d.provider, d.settings.RequiredModel
	health := dependencyHealth{Name: "provider", Status: "ok", Provider: p.name, Model: model}
	unavailable := func(reason string) dependencyHealth {
		health.Status, health.Reason = "unavailable", reason
		return health
	}
	if !p.configured() {
		return unavailable("provider_not_configured")
	}
	path := "/models"
	if model != "" {
		path += "/" + model
	}
	response, err := p.do(ctx, http.MethodGet, path, nil)
	if err == nil {
		response.Body.Close()
		return health
	}
	var failure *apiError
	switch {
	case !errors.As(err, &failure): // the dependency timeout ended it
		return unavailable("provider_timeout")
	case failure.timeout:
		return unavailable("provider_timeout")
	case failure.status == 0:
		return unavailable("provider_unreachable")
	case failure.status == http.StatusUnauthorized:
		return unavailable("provider_authentication_failed")
	case failure.status == http.StatusForbidden:
		return unavailable("provider_permission_denied")
	case failure.status == http.StatusTooManyRequests:
		return unavailable("provider_rate_limited")
	case failure.status == http.StatusNotFound && model != "":
		return unavailable("model_unavailable")
	default:
		return unavailable("provider_check_failed")
	}
}

// readinessAnswer is the runtime's ReadinessResponse.
type readinessAnswer struct {
	Status       string             `json:"status"`
	Dependencies []dependencyHealth `json:"dependencies"`
}

func readinessHandler(c Config, provider *providerClient) http.Handler {
	settings := c.readiness()
	if !settings.DependencyChecksEnabled {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			reply(w, http.StatusOK, map[string]string{"status": "ready"})
		})
	}
	readiness := &dependencyReadiness{provider: provider, settings: settings}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		dependency := readiness.evaluate()
		status := http.StatusOK
		if dependency.Status != "ok" {
			status = http.StatusServiceUnavailable
		}
		reply(w, status, readinessAnswer{dependency.Status, []dependencyHealth{dependency}})
	})
}
