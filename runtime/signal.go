package runtime

import "context"

// signal is a channel closed once (close), whose closing can also start a
// function with no goroutine waiting for it (whenFirst): a context, done
// when closed. A suspended rollout's end and its leaving a connection are
// signals, so that a lane following it holds no goroutine while it is
// parked.
type signal struct {
	context.Context
	close context.CancelFunc
}

func newSignal() signal {
	ctx, cancel := context.WithCancel(context.Background())
	return signal{ctx, cancel}
}

// whenFirst calls f in a goroutine of its own once the first of cs is
// done. Nothing waits meanwhile: each context holds f's trigger among its
// children (context.AfterFunc), and the others let it go once it fires.
func whenFirst(f func(), cs ...context.Context) {
	first, fire := context.WithCancel(context.Background())
	stops := make([]func() bool, len(cs))
	for i, c := range cs {
		stops[i] = context.AfterFunc(c, fire)
	}
	context.AfterFunc(first, func() {
		fire() // fired already: the context's resources, as vet asks
		for _, stop := range stops {
			stop()
		}
		f()
	})
}
