package report

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// CheckOutputs reports, before a run, the first output file that could not
// be written where its flag says: outputs maps a flag ("--json") to its path
// ("" for none). An existing file must be a file this process may write; a
// new one needs a folder that takes new files (a file of a name of its own
// is created there and removed). The path itself is neither created nor
// changed, so any number of ranks may check it at once.
func CheckOutputs(outputs map[string]string) error {
	flags := make([]string, 0, len(outputs))
	for f := range outputs {
		flags = append(flags, f)
	}
	sort.Strings(flags)
	for _, f := range flags {
		if err := checkOutput(outputs[f]); err != nil {
			return fmt.Errorf("%s: cannot create %s: %w", f, outputs[f], err)
		}
	}
	return nil
}

func checkOutput(path string) error {
	if path == "" {
		return nil
	}
	st, err := os.Stat(path)
	switch {
	case err == nil && st.IsDir():
		return errors.New("it is a folder")
	case err == nil:
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return unwrapPath(err)
		}
		return f.Close()
	case !errors.Is(err, fs.ErrNotExist):
		return unwrapPath(err)
	}
	dir := filepath.Dir(path)
	st, err = os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("no folder %s", dir)
	case err != nil:
		return unwrapPath(err)
	case !st.IsDir():
		return fmt.Errorf("%s is not a folder", dir)
	}
	// A file of its own name shows that the folder takes new files, without
	// racing other ranks that check the same path.
	f, err := os.CreateTemp(dir, ".epbench-check-*")
	if err != nil {
		return fmt.Errorf("%s: %w", dir, unwrapPath(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// unwrapPath drops the operation and path of a *fs.PathError, which the
// caller's message names already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
