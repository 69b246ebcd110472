// Command trussium-standin imitates the Trussium runtime on a real node, where
// the real image (ghcr.io/trussiumhq/trussium) cannot be pulled. It reads the
// configuration the operator renders (the TRUSSIUM_* environment of the
// ConfigMap and the API-key Secret), serves the health endpoints the probes
// call, and behaves like the real runtime where the pod contract touches it:
// it answers chat completions through its provider (chat.go, provider.go),
// gates readiness on that provider when asked to (readiness.go), exports the
// runtime's request metrics (metrics.go), spools uploads over 1 MiB to a
// temporary directory and fails them without one (upload.go), and on SIGTERM
// it shuts down as uvicorn does.
//
// `trussium-standin provider` runs something else: a stub of the provider
// itself (stub.go), for tests to point a runtime at.
//
// It is stricter than a real runtime has to be, so that tests notice when the
// operator renders something wrong: an unknown TRUSSIUM_* variable, a
// malformed value, running as root or on a writable root filesystem all make
// it exit 1 with one line saying why.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	prefix = "TRUSSIUM_"
	// Linux statfs flag of a read-only mount (ST_RDONLY).
	stRdonly = 0x1
)

// Config is the runtime's configuration, parsed from the environment.
type Config struct {
	Environment                   string `json:"environment"`
	Host                          string `json:"host"`
	Port                          int    `json:"port"`
	Provider                      string `json:"provider"`
	BaseURL                       string `json:"baseURL,omitempty"`
	ProviderRequestTimeoutSeconds int    `json:"providerRequestTimeoutSeconds,omitempty"`
	StreamIdleTimeoutSeconds      int    `json:"streamIdleTimeoutSeconds,omitempty"`
	GracefulShutdownSeconds       int    `json:"gracefulShutdownSeconds"`
	// Only whether a key was given: its value is never logged or served, only
	// sent to the provider.
	APIKeySet bool `json:"apiKeySet"`
	apiKey    string
	// Shown only when one of their variables is set (the runtime's defaults apply otherwise).
	Readiness      *Readiness `json:"readiness,omitempty"`
	MetricsEnabled *bool      `json:"metricsEnabled,omitempty"`
}

// Readiness is the runtime's TRUSSIUM_READINESS__* group.
type Readiness struct {
	DependencyChecksEnabled  bool    `json:"dependencyChecksEnabled"`
	DependencyTimeoutSeconds float64 `json:"dependencyTimeoutSeconds"`
	DependencyCacheSeconds   float64 `json:"dependencyCacheSeconds"`
	RequiredModel            string  `json:"requiredModel,omitempty"`
}

// The runtime's defaults for its readiness group (ReadinessSettings).
var defaultReadiness = Readiness{DependencyTimeoutSeconds: 1, DependencyCacheSeconds: 10}

// readiness is the group in effect: as configured, or the runtime's defaults.
func (c Config) readiness() Readiness {
	if c.Readiness == nil {
		return defaultReadiness
	}
	return *c.Readiness
}

// metricsEnabled is the runtime's TRUSSIUM_OBSERVABILITY__METRICS_ENABLED (default true).
func (c Config) metricsEnabled() bool {
	return c.MetricsEnabled == nil || *c.MetricsEnabled
}

// setting parses one variable's value into the Config.
type setting func(*Config, string) error

// settings are the variables the runtime reads: nested keys joined by "__".
var settings = map[string]setting{
	"TRUSSIUM_ENVIRONMENT": func(c *Config, v string) error {
		if v != "production" && v != "development" {
			return errors.New("must be production or development")
		}
		c.Environment = v
		return nil
	},
	"TRUSSIUM_RUNTIME__HOST": func(c *Config, v string) error {
		if net.ParseIP(v) == nil {
			return errors.New("must be an IP address")
		}
		c.Host = v
		return nil
	},
	"TRUSSIUM_RUNTIME__PORT": intSetting(1, 65535, func(c *Config) *int { return &c.Port }),
	"TRUSSIUM_PROVIDER__NAME": func(c *Config, v string) error {
		if v != "openai" && v != "ollama" {
			return errors.New("must be openai or ollama")
		}
		c.Provider = v
		return nil
	},
	"TRUSSIUM_PROVIDER__BASE_URL": func(c *Config, v string) error {
		if err := httpURL(v); err != nil {
			return err
		}
		c.BaseURL = v
		return nil
	},
	"TRUSSIUM_PROVIDER__API_KEY": func(c *Config, v string) error {
		if v == "" {
			return errors.New("must not be empty")
		}
		c.APIKeySet = true
		c.apiKey = v
		return nil
	},
	"TRUSSIUM_TIMEOUTS__PROVIDER_REQUEST_SECONDS": intSetting(1, 3600,
		func(c *Config) *int { return &c.ProviderRequestTimeoutSeconds }),
	"TRUSSIUM_TIMEOUTS__STREAM_IDLE_SECONDS": intSetting(1, 3600,
		func(c *Config) *int { return &c.StreamIdleTimeoutSeconds }),
	"TRUSSIUM_RUNTIME__GRACEFUL_SHUTDOWN_SECONDS": intSetting(1, 3600,
		func(c *Config) *int { return &c.GracefulShutdownSeconds }),
	"TRUSSIUM_READINESS__DEPENDENCY_CHECKS_ENABLED": boolSetting(
		func(c *Config) *bool { return &c.readinessGroup().DependencyChecksEnabled }),
	"TRUSSIUM_READINESS__DEPENDENCY_TIMEOUT_SECONDS": secondsSetting(
		func(c *Config) *float64 { return &c.readinessGroup().DependencyTimeoutSeconds }),
	"TRUSSIUM_READINESS__DEPENDENCY_CACHE_SECONDS": secondsSetting(
		func(c *Config) *float64 { return &c.readinessGroup().DependencyCacheSeconds }),
	"TRUSSIUM_READINESS__REQUIRED_MODEL": func(c *Config, v string) error {
		model := strings.TrimSpace(v)
		if model == "" {
			return errors.New("must not be blank")
		}
		c.readinessGroup().RequiredModel = model
		return nil
	},
	"TRUSSIUM_OBSERVABILITY__METRICS_ENABLED": boolSetting(func(c *Config) *bool {
		if c.MetricsEnabled == nil {
			c.MetricsEnabled = new(bool)
		}
		return c.MetricsEnabled
	}),
	// Settings of the runtime's that change nothing the stand-in does: checked, then ignored.
	"TRUSSIUM_RUNTIME__SERVICE_CLEANUP_SECONDS":                 checked(seconds),
	"TRUSSIUM_RUNTIME__COMPONENT_HEALTH_TIMEOUT_SECONDS":        checked(seconds),
	"TRUSSIUM_RUNTIME__CAPABILITY_AVAILABILITY_TIMEOUT_SECONDS": checked(seconds),
	"TRUSSIUM_RUNTIME__CAPABILITY_HEALTH_TIMEOUT_SECONDS":       checked(seconds),
	"TRUSSIUM_RERANKING__BASE_URL":                              checked(httpURL),
	"TRUSSIUM_RERANKING__API_KEY":                               checked(nonBlank),
	"TRUSSIUM_OBSERVABILITY__TRACING_ENABLED":                   checked(boolean),
	"TRUSSIUM_OBSERVABILITY__TRACING_SERVICE_NAME":              checked(nonBlank),
	"TRUSSIUM_OBSERVABILITY__TRACING_SAMPLE_RATIO":              checked(ratio),
	"TRUSSIUM_OBSERVABILITY__OTLP_TRACES_ENDPOINT":              checked(httpURL),
	"TRUSSIUM_OBSERVABILITY__OTLP_EXPORT_TIMEOUT_SECONDS":       checked(seconds),
}

// readinessGroup is the readiness group being parsed, created with the
// runtime's defaults by its first variable.
func (c *Config) readinessGroup() *Readiness {
	if c.Readiness == nil {
		group := defaultReadiness
		c.Readiness = &group
	}
	return c.Readiness
}

func boolSetting(field func(*Config) *bool) setting {
	return func(c *Config, v string) error {
		if err := boolean(v); err != nil {
			return err
		}
		*field(c) = v == "true"
		return nil
	}
}

func secondsSetting(field func(*Config) *float64) setting {
	return func(c *Config, v string) error {
		if err := seconds(v); err != nil {
			return err
		}
		*field(c), _ = strconv.ParseFloat(v, 64)
		return nil
	}
}

// checked is a setting the stand-in only validates.
func checked(check func(string) error) setting {
	return func(_ *Config, v string) error { return check(v) }
}

// boolean takes the two spellings the operator renders; pydantic would also
// take "1", "yes", "on" and more, none of which the operator writes.
func boolean(v string) error {
	if v != "true" && v != "false" {
		return errors.New("must be true or false")
	}
	return nil
}

// seconds is a positive, finite number of seconds (a float, as the runtime's).
func seconds(v string) error {
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || !(n > 0) || math.IsInf(n, 0) {
		return errors.New("must be a positive number of seconds")
	}
	return nil
}

func ratio(v string) error {
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 || n > 1 {
		return errors.New("must be a number from 0 to 1")
	}
	return nil
}

func nonBlank(v string) error {
	if strings.TrimSpace(v) == "" {
		return errors.New("must not be blank")
	}
	return nil
}

func httpURL(v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("must be an absolute http or https URL")
	}
	return nil
}

func intSetting(lo, hi int, field func(*Config) *int) setting {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi || strconv.Itoa(n) != v {
			return fmt.Errorf("must be a decimal integer in %d..%d", lo, hi)
		}
		*field(c) = n
		return nil
	}
}

// ParseConfig reads every TRUSSIUM_* variable of environ ("KEY=value" pairs)
// and reports all problems at once. Values never appear in errors.
func ParseConfig(environ []string) (Config, error) {
	c := Config{Environment: "development", Host: "0.0.0.0", Port: 9000, GracefulShutdownSeconds: 30}
	var problems []string
	for _, kv := range environ {
		key, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		parse, known := settings[key]
		if !known {
			problems = append(problems, key+": unknown setting")
			continue
		}
		if err := parse(&c, value); err != nil {
			problems = append(problems, key+": "+err.Error())
		}
	}
	if c.Provider == "" {
		problems = append(problems, "TRUSSIUM_PROVIDER__NAME: required")
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return c, errors.New(strings.Join(problems, "; "))
	}
	return c, nil
}

// checkSandbox refuses the two setups the runtime contract forbids.
func checkSandbox(allowWritableRoot bool) error {
	if os.Geteuid() == 0 {
		return errors.New("running as root (uid 0); the runtime runs as a numeric non-root user (10001)")
	}
	if allowWritableRoot {
		return nil
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs("/", &fs); err != nil {
		return fmt.Errorf("cannot inspect the root filesystem: %w", err)
	}
	if fs.Flags&stRdonly == 0 {
		return errors.New("the root filesystem is writable; the runtime expects readOnlyRootFilesystem " +
			"(pass --allow-writable-root to run it outside a container)")
	}
	return nil
}

// handler serves the probes' endpoints, chat completions, the upload
// endpoint, the metrics and the parsed configuration, counting the requests
// in flight.
func handler(c Config, inFlight *atomic.Int64) http.Handler {
	provider := newProviderClient(c)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health/live", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusOK, map[string]string{"status": "live"})
	})
	mux.Handle("GET /health/ready", readinessHandler(c, provider))
	mux.Handle("POST /v1/chat/completions", chatHandler(c, provider))
	mux.HandleFunc("POST /v1/audio/transcriptions", transcribe)
	mux.HandleFunc("GET /standin/config", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusOK, c)
	})
	var served http.Handler = mux
	if c.metricsEnabled() {
		m := newRequestMetrics()
		mux.Handle("GET /metrics", m)
		served = m.measure(mux)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Add(1)
		defer inFlight.Add(-1)
		served.ServeHTTP(w, r)
	})
}

func reply(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "trussium-standin: "+format+"\n", args...)
}

func fail(format string, args ...any) {
	logf("refusing to start: "+format, args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "provider" {
		runProviderStub(os.Args[2:])
		return
	}
	allowWritableRoot := flag.Bool("allow-writable-root", false,
		"start even when the root filesystem is writable (for running outside a container)")
	flag.Parse()

	if err := checkSandbox(*allowWritableRoot); err != nil {
		fail("%v", err)
	}
	c, err := ParseConfig(os.Environ())
	if err != nil {
		fail("invalid configuration: %v", err)
	}
	address := net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
	listener, err := net.Listen("tcp", address)
	if err != nil {
		fail("cannot listen on %s: %v", address, err)
	}

	var inFlight atomic.Int64
	server := &http.Server{Handler: handler(c, &inFlight), ReadHeaderTimeout: 5 * time.Second}
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	served := make(chan error, 1)
	go func() { served <- server.Serve(listener) }()
	summary, _ := json.Marshal(c)
	logf("serving on %s with %s", listener.Addr(), summary)
	if dir, err := usableTempDir(); err != nil {
		logf("uploads over 1 MiB will fail: %v", err)
	} else {
		logf("uploads over 1 MiB spool to %s", dir)
	}

	select {
	case err := <-served:
		fail("server stopped: %v", err)
	case sig := <-signals:
		logf("%v: listener closed; waiting up to %ds for %d request(s) in flight",
			sig, c.GracefulShutdownSeconds, inFlight.Load())
	}
	shutdown(server, time.Duration(c.GracefulShutdownSeconds)*time.Second, signals, &inFlight)
}

// cancellationCleanup is how long uvicorn lets cancelled requests clean up
// (the runtime's CANCELLATION_CLEANUP_SECONDS), here their spooled files.
const cancellationCleanup = time.Second

// shutdown stops the way uvicorn does: Shutdown closes the listener at once
// (new connections are refused) and idle connections, then returns as soon
// as no request is in flight. Requests still running when the drain period
// ends, or at a second SIGINT, are cut off.
func shutdown(server *http.Server, drain time.Duration, signals <-chan os.Signal, inFlight *atomic.Int64) {
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	go func() {
		for sig := range signals {
			if sig == syscall.SIGINT {
				logf("interrupt again: stopping now")
				cancel()
				return
			}
		}
	}()
	began := time.Now()
	if err := server.Shutdown(ctx); err != nil {
		logf("%d request(s) still in flight after %v (drain period %v): closing them",
			inFlight.Load(), time.Since(began).Round(time.Millisecond), drain)
		server.Close()
		for deadline := time.Now().Add(cancellationCleanup); inFlight.Load() > 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		return
	}
	logf("no request in flight after %v; exiting", time.Since(began).Round(time.Millisecond))
}
