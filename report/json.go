package report

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON writes r as indented JSON, stamping the schema. It fails on
// non-finite numbers other than calc_diff, which JSON cannot carry.
func WriteJSON(w io.Writer, r *Result) error {
	if r == nil {
		return fmt.Errorf("%w: nil result", ErrIncomplete)
	}
	out := *r
	out.Schema = Schema
	b, err := json.MarshalIndent(&out, "", "  ")
	if err != nil {
		return fmt.Errorf("report: encode JSON: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
