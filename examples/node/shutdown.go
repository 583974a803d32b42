package main

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodekit/nodekit/agent"
)

// shutdownOf reads the KubeletConfiguration's graceful node shutdown
// fields; agent.New validates them.
func shutdownOf(kc *kubeletv1beta1.KubeletConfiguration) agent.ShutdownConfig {
	c := agent.ShutdownConfig{GracePeriod: kc.ShutdownGracePeriod.Duration, CriticalPodsGracePeriod: kc.ShutdownGracePeriodCriticalPods.Duration}
	for _, p := range kc.ShutdownGracePeriodByPodPriority {
		c.ByPodPriority = append(c.ByPodPriority, agent.ShutdownPriority{Priority: p.Priority, GracePeriodSeconds: p.ShutdownGracePeriodSeconds})
	}
	return c
}

// shutdownPeriod is the whole time a node shutdown may take, as the
// kubelet counts it: the sum of the by-priority periods when set, else
// shutdownGracePeriod. Zero: no graceful shutdown.
func shutdownPeriod(c agent.ShutdownConfig) time.Duration {
	if len(c.ByPodPriority) == 0 {
		return c.GracePeriod
	}
	var d time.Duration
	for _, p := range c.ByPodPriority {
		d += time.Duration(p.GracePeriodSeconds) * time.Second
	}
	return d
}

// shutdownOnStop returns the context the node runs under. Without a
// shutdown period it is ctx. With one, when ctx ends (a stop signal) the
// agent's Shutdown terminates every pod, bounded by the period, while the
// node still runs, and only then does the returned context end. stop
// ends it at once and returns once the shutdown, if any, has.
func shutdownOnStop(ctx context.Context, a *agent.Agent, c agent.ShutdownConfig, log logr.Logger) (runCtx context.Context, stop func()) {
	period := shutdownPeriod(c)
	if period <= 0 {
		return ctx, func() {}
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		select {
		case <-runCtx.Done():
			return
		case <-ctx.Done():
		}
		log.Info("stopping: terminating the pods before the node stops", "shutdownGracePeriod", period)
		sctx, sCancel := context.WithTimeout(runCtx, period)
		defer sCancel()
		if err := a.Shutdown(sctx); err != nil {
			log.Error(err, "node shutdown did not finish")
		}
	}()
	return runCtx, func() { cancel(); <-done }
}
