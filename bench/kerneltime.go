package bench

import (
	"errors"
	"fmt"
)

// KernelTimer collects per-kernel device time over the timed loop (the
// in-process CUPTI collector).
type KernelTimer interface {
	// Start begins collecting; called after the warm-up.
	Start() error
	// Stop ends collecting, flushes, and returns the average duration in
	// microseconds of the dispatch and combine kernels. It fails when the
	// kernel counts are not the launches made or records were dropped.
	Stop(dispatches, combines int) (dispatchUs, combineUs float64, err error)
}

// ArmedTimer is a KernelTimer that does set-up work at the first kernels it
// sees (the CUPTI collector): Arm, called before the warm-up, moves that
// work out of the first timed pair.
type ArmedTimer interface {
	KernelTimer
	Arm() error
}

// kernelWindows runs the kernel timer over the timed pairs only: it is
// stopped around each --validate-every check, and the windows' averages are
// combined weighted by their pairs.
type kernelWindows struct {
	timer      KernelTimer
	on         bool
	pairs      int     // timed pairs in the open window
	done       int     // timed pairs in the closed windows
	dSum, cSum float64 // µs × pairs over the closed windows
	err        error
}

func (w *kernelWindows) start() error {
	if w.timer == nil || w.err != nil {
		return nil
	}
	if err := w.timer.Start(); err != nil {
		w.err = err
		return err
	}
	w.on, w.pairs = true, 0
	return nil
}

// stop closes the open window; the device must be synchronized.
func (w *kernelWindows) stop() {
	if !w.on {
		return
	}
	w.on = false
	d, c, err := w.timer.Stop(w.pairs, w.pairs)
	if err != nil {
		w.err = err
		return
	}
	w.dSum += d * float64(w.pairs)
	w.cSum += c * float64(w.pairs)
	w.done += w.pairs
}

// result is the average over every window, which must cover iters pairs.
func (w *kernelWindows) result(iters int) (dispatchUs, combineUs float64, err error) {
	switch {
	case w.timer == nil:
		return 0, 0, errors.New("no kernel timer")
	case w.err != nil:
		return 0, 0, w.err
	case w.done != iters || iters == 0:
		return 0, 0, fmt.Errorf("kernel timing covered %d of %d timed pairs", w.done, iters)
	}
	return w.dSum / float64(iters), w.cSum / float64(iters), nil
}
