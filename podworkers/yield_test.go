package podworkers_test

import "runtime"

func goschedHelper() { runtime.Gosched() }
