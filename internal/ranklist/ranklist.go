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
