package status_test

import "runtime"

func gosched() { runtime.Gosched() }
