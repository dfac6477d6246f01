package app

// Reloading on SIGHUP and whenever the configuration file changes.

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
)

// watchConfig reloads on SIGHUP and on changes to the file until ctx ends.
// A gateway configured by flags alone has nothing to reload: SIGHUP is then
// noted in the log rather than ending the process, as it would by default.
func (g *Gateway) watchConfig(ctx context.Context) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if g.configPath == "" {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-hup:
				g.log.Info("SIGHUP: nothing to reload, the configuration came from flags")
			}
		}
	}
	changed := make(chan struct{}, 1)
	go func() {
		err := config.Watch(ctx, g.configPath, func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		})
		if err != nil && ctx.Err() == nil {
			g.log.Warn("not watching the configuration file; SIGHUP still reloads it", "err", err)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			g.reload()
		case <-changed:
			g.reload()
		}
	}
}
