package app

// The telemetry block, wired: a tracer provider when traces are on, the
// access log's writer when it is, both handed to the router as plain
// values and closed with the gateway.

import (
	"context"
	"os"
	"time"

	"go.opentelemetry.io/otel"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router"
	"gitea.mynodes.xyz/ilker/llmgw/internal/telemetry"
)

// telemetryShutdown bounds sending the spans still batched when the
// gateway closes: a collector that does not answer must not hold up the
// process's exit.
const telemetryShutdown = 5 * time.Second

// openTelemetry builds what t asks for, keeping on g what must be closed.
func (g *Gateway) openTelemetry(ctx context.Context, t config.Telemetry) (router.TelemetryOptions, error) {
	var o router.TelemetryOptions
	if t.TracesOn(os.Getenv) {
		tr, err := telemetry.NewTracing(ctx, t.Endpoint, os.Getenv)
		if err != nil {
			return o, err
		}
		g.tracing = tr
		o.Tracer, o.RecordContent = tr.Provider, t.RecordContent
		o.ContinueClientTrace = t.ClientTrace == config.ClientTraceContinue
		// What the SDK cannot do (a collector that does not answer) is
		// logged as llmgw logs, not on the standard logger.
		log := g.log
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("traces", "err", err) }))
		g.log.Info("traces are exported over OTLP/HTTP", "endpoint", t.Endpoint, "record_content", t.RecordContent, "client_trace", t.ClientTrace)
	}
	w, err := telemetry.OpenAccessLog(t.AccessLog)
	if err != nil {
		return o, err
	}
	if w != nil {
		g.accessLog, o.AccessLog = w, w
	}
	return o, nil
}

// closeTelemetry sends the spans still batched and closes the access log.
func (g *Gateway) closeTelemetry() {
	if g.tracing != nil {
		ctx, cancel := context.WithTimeout(context.Background(), telemetryShutdown)
		defer cancel()
		if err := g.tracing.Shutdown(ctx); err != nil {
			g.log.Warn("spans could not all be sent", "err", err)
		}
	}
	if g.accessLog != nil {
		g.accessLog.Close()
	}
}
