// Package ranklist spells a set of ranks the one way every message of
// epbench does.
package ranklist

import (
	"strconv"
	"strings"
)

// String writes ranks as "rank 3" or "ranks 1, 3" (in the order given).
func String(ranks []int) string {
	who := make([]string, len(ranks))
	for i, r := range ranks {
		who[i] = strconv.Itoa(r)
	}
	if len(ranks) == 1 {
		return "rank " + who[0]
	}
	return "ranks " + strings.Join(who, ", ")
}

// Failed lists the ranks whose record in all (every rank's record of n
// bytes in rank order, as an allgather returns them) says they failed: its
// last byte is not 1.
func Failed(all []byte, n int) []int {
	var bad []int
	for r := 0; r < len(all)/n; r++ {
		if all[(r+1)*n-1] != 1 {
			bad = append(bad, r)
		}
	}
	return bad
}
