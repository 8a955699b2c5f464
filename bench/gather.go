package bench

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/epbench/epbench/mpi"
)

// GatherJSON collects every rank's v (as JSON, in a fixed slot of slot
// bytes each) on every rank, in rank order. Collective, and every rank
// joins the gather whatever its record: one that cannot send its record
// (not encodable, or longer than slot) sends none and returns why, and the
// others fail on that rank's empty slot instead of waiting for it.
func GatherJSON[T any](c *mpi.Comm, v T, slot int) ([]T, error) {
	b, mine := json.Marshal(v)
	if mine == nil && len(b) > slot {
		mine = fmt.Errorf("record of %d bytes exceeds %d", len(b), slot)
	}
	buf := make([]byte, slot)
	if mine == nil {
		copy(buf, b)
	}
	all, err := c.AllgatherBytes(buf)
	if err != nil {
		return nil, err
	}
	if mine != nil {
		return nil, mine
	}
	out := make([]T, c.Size())
	for r := range out {
		rec := all[r*slot : (r+1)*slot]
		if i := bytes.IndexByte(rec, 0); i >= 0 {
			rec = rec[:i]
		}
		if err := json.Unmarshal(rec, &out[r]); err != nil {
			return nil, fmt.Errorf("rank %d record: %w", r, err)
		}
	}
	return out, nil
}
