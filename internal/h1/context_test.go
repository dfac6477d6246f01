package h1

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRequestContextEnds(t *testing.T) {
	x := new(reqContext)
	if x.Err() != nil {
		t.Fatalf("Err before the end = %v, want nil", x.Err())
	}
	done := x.Done()
	ran := make(chan string, 3)
	stopKept := x.AfterFunc(func() { ran <- "kept" })
	stopStopped := x.AfterFunc(func() { ran <- "stopped" })
	if !stopStopped() {
		t.Error("stop before the end reported false")
	}
	if stopStopped() {
		t.Error("a second stop reported true")
	}
	child, cancelChild := context.WithCancel(x)
	defer cancelChild()
	x.cancel()
	x.cancel() // a second end does nothing
	select {
	case <-done:
	default:
		t.Error("Done asked for before the end is not closed at it")
	}
	select {
	case <-x.Done():
	default:
		t.Error("Done after the end is not closed")
	}
	if !errors.Is(x.Err(), context.Canceled) || !errors.Is(context.Cause(x), context.Canceled) {
		t.Errorf("Err, Cause after the end = %v, %v; want context.Canceled", x.Err(), context.Cause(x))
	}
	select {
	case got := <-ran:
		if got != "kept" {
			t.Errorf("ran %q, want the function not stopped", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an AfterFunc function did not run at the end")
	}
	if stopKept() {
		t.Error("stop after the function ran reported true")
	}
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a context made from the request's did not end with it")
	}
	late := make(chan struct{})
	if x.AfterFunc(func() { close(late) })() {
		t.Error("stop of a function given after the end reported true")
	}
	select {
	case <-late:
	case <-time.After(5 * time.Second):
		t.Fatal("a function given after the end did not run")
	}
	select {
	case got := <-ran:
		t.Errorf("%q ran after all", got)
	default:
	}
}

// A context made from a request's and ended first takes its function off
// the request's, and one made while the request's lasts costs it no
// goroutine and no allocation beyond the stop closure.
func TestRequestContextChildren(t *testing.T) {
	x := new(reqContext)
	for range 3 {
		ctx, cancel := context.WithCancel(x)
		stop := context.AfterFunc(ctx, func() {})
		cancel()
		if stop() {
			t.Error("an AfterFunc on a cancelled child was not run")
		}
	}
	if len(x.funcs) != 0 {
		t.Errorf("%d functions left on the request's context after its children ended", len(x.funcs))
	}
	if n := testing.AllocsPerRun(100, func() { x.AfterFunc(func() {})() }); n != 1 {
		t.Errorf("AfterFunc and its stop made %v allocations, want 1", n)
	}
}
