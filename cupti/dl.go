package cupti

import (
	"runtime"

	"github.com/epbench/epbench/internal/dl"
)

const goarch = runtime.GOARCH

// dlOpen opens a library with dlopen (the production openFunc).
func dlOpen(name string) (library, error) {
	l, err := dl.Open(name)
	if err != nil {
		return nil, err
	}
	return l, nil
}
