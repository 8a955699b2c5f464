package report

import (
	"fmt"
	"io"
	"os"
)

// SaveJSON writes r as JSON (WriteJSON) to the file at path.
func SaveJSON(path string, r *Result) error {
	if err := writeFile(path, func(w io.Writer) error { return WriteJSON(w, r) }); err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	return nil
}

// SaveSweep writes s as CSV to csvPath and as JSON to jsonPath, each where
// its path is not empty.
func SaveSweep(s *Sweep, csvPath, jsonPath string) error {
	if csvPath != "" {
		if err := writeFile(csvPath, func(w io.Writer) error { return WriteSweepCSV(w, s) }); err != nil {
			return err
		}
	}
	if jsonPath != "" {
		return writeFile(jsonPath, func(w io.Writer) error { return WriteSweepJSON(w, s) })
	}
	return nil
}

// writeFile creates path and writes it with write.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
