// Command trussium-standin imitates the Trussium runtime on a real node, where
// the real image (ghcr.io/trussiumhq/trussium) cannot be pulled. It reads the
// configuration the operator renders (the TRUSSIUM_* environment of the
// ConfigMap and the API-key Secret), serves the health endpoints the probes
// call, and behaves like the real runtime where the pod contract touches it:
// it spools uploads over 1 MiB to a temporary directory and fails them without
// one (upload.go), and on SIGTERM it shuts down as uvicorn does.
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
	// Only whether a key was given: its value is never logged or served.
	APIKeySet bool `json:"apiKeySet"`
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
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("must be an absolute http or https URL")
		}
		c.BaseURL = v
		return nil
	},
	"TRUSSIUM_PROVIDER__API_KEY": func(c *Config, v string) error {
		if v == "" {
			return errors.New("must not be empty")
		}
		c.APIKeySet = true
		return nil
	},
	"TRUSSIUM_TIMEOUTS__PROVIDER_REQUEST_SECONDS": intSetting(1, 3600,
		func(c *Config) *int { return &c.ProviderRequestTimeoutSeconds }),
	"TRUSSIUM_TIMEOUTS__STREAM_IDLE_SECONDS": intSetting(1, 3600,
		func(c *Config) *int { return &c.StreamIdleTimeoutSeconds }),
	"TRUSSIUM_RUNTIME__GRACEFUL_SHUTDOWN_SECONDS": intSetting(1, 3600,
		func(c *Config) *int { return &c.GracefulShutdownSeconds }),
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

// handler serves the probes' endpoints, the upload endpoint and the parsed
// configuration, counting the requests in flight.
func handler(c Config, inFlight *atomic.Int64) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health/live", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusOK, map[string]string{"status": "live"})
	})
	mux.HandleFunc("GET /health/ready", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.HandleFunc("POST /v1/audio/transcriptions", transcribe)
	mux.HandleFunc("GET /standin/config", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusOK, c)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Add(1)
		defer inFlight.Add(-1)
		mux.ServeHTTP(w, r)
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
